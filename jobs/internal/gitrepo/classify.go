package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/packline/packline/api/redact"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// Classify sorts an error from reaching the repository at url for ref
// into a failure: denied credentials are permanent (SourceAuth); a
// missing or empty repository, ref or object is permanent
// (SourceNotFound); an HTTP status is classified as any source server's
// (failure.HTTPStatus); anything else is the network or the server
// misbehaving, which a later attempt may get past (retryable
// SourceFailed). A cancelled context is returned as it is, and an error
// already classified is kept. The message names the URL without its
// credentials or query.
func Classify(err error, url, ref string) error {
	if err == nil {
		return nil
	}
	var fe *failure.Error
	if errors.As(err, &fe) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	err = fmt.Errorf("git %s@%s: %w", publicURL(url), ref, err)
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return failure.Permanent(workerv1.ReasonSourceAuth, err)
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, transport.ErrEmptyRemoteRepository),
		errors.Is(err, plumbing.ErrObjectNotFound), isRefNotFound(err):
		return failure.Permanent(workerv1.ReasonSourceNotFound, err)
	}
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) {
		if sc, ok := ue.Err.(interface{ StatusCode() int }); ok {
			return failure.HTTPStatus(sc.StatusCode(), err)
		}
	}
	return failure.Retryable(workerv1.ReasonSourceFailed, err)
}

func isRefNotFound(err error) bool {
	var nf git.NoMatchingRefSpecError
	return errors.As(err, &nf) || errors.Is(err, plumbing.ErrReferenceNotFound) ||
		strings.Contains(err.Error(), "couldn't find remote ref")
}

// publicURL is the repository's address as messages name it.
func publicURL(url string) string { return redact.Public(url) }
