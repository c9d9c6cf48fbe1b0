package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/google/go-cmp/cmp"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

type statusErr int

func (s statusErr) Error() string   { return fmt.Sprintf("status %d", int(s)) }
func (s statusErr) StatusCode() int { return int(s) }

func TestClassify(t *testing.T) {
	type class struct {
		Reason    string
		Permanent bool
		Unwrapped bool // returned as it is, not a failure
	}
	already := failure.Permanent(workerv1.ReasonSourceAuth, errors.New("kept"))
	for _, tc := range []struct {
		name string
		err  error
		want class
	}{
		{"authentication required", transport.ErrAuthenticationRequired, class{workerv1.ReasonSourceAuth, true, false}},
		{"authorization failed", transport.ErrAuthorizationFailed, class{workerv1.ReasonSourceAuth, true, false}},
		{"invalid auth method", transport.ErrInvalidAuthMethod, class{workerv1.ReasonSourceAuth, true, false}},
		{"repository not found", transport.ErrRepositoryNotFound, class{workerv1.ReasonSourceNotFound, true, false}},
		{"empty repository", transport.ErrEmptyRemoteRepository, class{workerv1.ReasonSourceNotFound, true, false}},
		{"reference not found", plumbing.ErrReferenceNotFound, class{workerv1.ReasonSourceNotFound, true, false}},
		{"object not found", plumbing.ErrObjectNotFound, class{workerv1.ReasonSourceNotFound, true, false}},
		{"no matching refspec", git.NoMatchingRefSpecError{}, class{workerv1.ReasonSourceNotFound, true, false}},
		{"server names no ref", errors.New("couldn't find remote ref refs/heads/x"), class{workerv1.ReasonSourceNotFound, true, false}},
		{"HTTP 503", plumbing.NewUnexpectedError(statusErr(503)), class{workerv1.ReasonSourceFailed, false, false}},
		{"HTTP 403", plumbing.NewUnexpectedError(statusErr(403)), class{workerv1.ReasonSourceAuth, true, false}},
		{"network", errors.New("dial tcp: connection refused"), class{workerv1.ReasonSourceFailed, false, false}},
		{"cancelled", fmt.Errorf("clone: %w", context.Canceled), class{Unwrapped: true}},
		{"deadline", context.DeadlineExceeded, class{Unwrapped: true}},
		{"already classified", already, class{workerv1.ReasonSourceAuth, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Classify(tc.err, "https://user:tok@git.example.com/r.git?token=x", "main")
			var got class
			var fe *failure.Error
			if errors.As(err, &fe) {
				got = class{Reason: fe.Reason, Permanent: fe.Permanent}
			} else {
				got.Unwrapped = err == tc.err
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Classify(%v) (-want +got):\n%s", tc.err, diff)
			}
			if msg := err.Error(); strings.Contains(msg, "tok") || strings.Contains(msg, "?") {
				t.Errorf("message leaks the URL's credentials or query: %s", msg)
			}
		})
	}
	if Classify(nil, "u", "main") != nil {
		t.Error("Classify(nil) is not nil")
	}
}
