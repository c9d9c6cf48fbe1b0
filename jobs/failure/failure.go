// Package failure classifies worker errors into the result contract's
// reasons, and decides which are permanent (retrying cannot help: bad input,
// denied credentials, missing source) and which are retryable (5xx,
// timeouts, refused connections).
package failure

import (
	"context"
	"errors"
	"net"
	"net/http"
	"oras.land/oras-go/v2/registry/remote/auth"
	"syscall"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/errcode"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// Reasons written by the worker.
const (
	ReasonInvalidSpec     = "InvalidSpec"
	ReasonSourceNotFound  = "SourceNotFound"
	ReasonSourceAuth      = "SourceAuthDenied"
	ReasonSourceFailed    = "SourceFailed"
	ReasonChecksum        = "ChecksumMismatch"
	ReasonUnsafeArchive   = "UnsafeArchive"
	ReasonPackFailed      = "PackFailed"
	ReasonRenderFailed    = "RenderFailed"
	ReasonRegistryAuth    = "RegistryAuthDenied"
	ReasonRegistryFailed  = "RegistryUnavailable"
	ReasonPushFailed      = "PushFailed"
	ReasonDeadlineReached = "DeadlineExceeded"
)

// ReasonTemplateRejected: a Claim's template breaks the render sandbox (a
// remote base, a path outside the repository, a symlink, a plugin or a Helm
// chart). Permanent: the template has to change.
const ReasonTemplateRejected = "TemplateRejected"

// ReasonRenderTooLarge: a Claim's render would exceed the object, size or
// time bound (nested bases multiply objects). Permanent: the template or
// the limit has to change.
const ReasonRenderTooLarge = "RenderTooLarge"

// ReasonUndeclaredKind: a Claim's render holds a kind its ClaimTemplate
// does not declare in spec.kinds. Admission checked the requester's right to
// create the declared kinds only, so nothing else may be pushed.
const ReasonUndeclaredKind = "UndeclaredKind"

// ReasonTemplateAuth: a Claim's template repository refused the
// credentials of the ClaimTemplate's spec.source.secretRef, or needs some
// and the template has none. Permanent: an admin has to fix the Secret.
const ReasonTemplateAuth = "TemplateAuthDenied"

// Signing failures. The key ones are permanent (an admin or the user has
// to fix the Secret); a signature push that fails is retried, and the
// retry only signs: the artifact is already pushed.
const (
	ReasonSigningKeyMissing     = "SigningKeyMissing"
	ReasonSigningKeyPassword    = "SigningKeyWrongPassword"
	ReasonSigningKeyUnsupported = "SigningKeyUnsupported"
	ReasonSignaturePush         = "SignaturePushFailed"
)

// Error is an error with a reason and a permanence already decided.
type Error struct {
	Reason    string
	Permanent bool
	Err       error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Permanent wraps err as a permanent failure with reason.
func Permanent(reason string, err error) error {
	return &Error{Reason: reason, Permanent: true, Err: err}
}

// Retryable wraps err as a retryable failure with reason.
func Retryable(reason string, err error) error {
	return &Error{Reason: reason, Permanent: false, Err: err}
}

// HTTPStatus turns an HTTP status from a source server into a failure:
// 401/403 permanent auth, 404 permanent not-found, 5xx and 429 retryable.
func HTTPStatus(code int, err error) error {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return Permanent(ReasonSourceAuth, err)
	case code == http.StatusNotFound || code == http.StatusGone:
		return Permanent(ReasonSourceNotFound, err)
	case code == http.StatusTooManyRequests || code >= 500:
		return Retryable(ReasonSourceFailed, err)
	default:
		return Permanent(ReasonSourceFailed, err)
	}
}

// Registry classifies an error from talking to an OCI registry.
func Registry(err error) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return err
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return Permanent(ReasonRegistryAuth, err)
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return Retryable(ReasonRegistryFailed, err)
		case resp.StatusCode == http.StatusNotFound:
			return Permanent(ReasonSourceNotFound, err)
		default:
			return Permanent(ReasonPushFailed, err)
		}
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return Permanent(ReasonSourceNotFound, err)
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		// The registry asked for credentials and none were given: no
		// retry can help, setting a Secret can.
		return Permanent(ReasonRegistryAuth, err)
	}
	if transient(err) {
		return Retryable(ReasonRegistryFailed, err)
	}
	return Retryable(ReasonPushFailed, err)
}

// transient reports network-level errors that a later attempt may not hit.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// ToResult turns any error into the result contract's error. Unclassified
// errors are retryable unless they are plainly network-free, in which case
// retrying is still the safer default: a later attempt is cheap, a wrongly
// Stalled resource needs a human.
func ToResult(err error) workerv1.Result {
	var fe *Error
	if errors.As(err, &fe) {
		return workerv1.Result{Error: &workerv1.Error{Reason: fe.Reason, Message: err.Error(), Permanent: fe.Permanent}}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return workerv1.Result{Error: &workerv1.Error{Reason: ReasonDeadlineReached, Message: err.Error()}}
	}
	if transient(err) {
		return workerv1.Result{Error: &workerv1.Error{Reason: ReasonRegistryFailed, Message: err.Error()}}
	}
	return workerv1.Result{Error: &workerv1.Error{Reason: "WorkerFailed", Message: err.Error()}}
}
