// Package failure classifies worker errors (oras, HTTP, network) into the
// reasons of the worker contract, declared with their class and hint in
// api/worker/v1, and decides which are permanent (retrying cannot help:
// bad input, denied credentials, missing source) and which are retryable
// (5xx, timeouts, refused connections). It stays on the worker side so the
// manager never links oras-go.
package failure

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	workerv1 "github.com/packline/packline/api/worker/v1"
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
		return Permanent(workerv1.ReasonSourceAuth, err)
	case code == http.StatusNotFound || code == http.StatusGone:
		return Permanent(workerv1.ReasonSourceNotFound, err)
	case code == http.StatusTooManyRequests || code >= 500:
		return Retryable(workerv1.ReasonSourceFailed, err)
	default:
		return Permanent(workerv1.ReasonSourceFailed, err)
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
			return Permanent(workerv1.ReasonRegistryAuth, err)
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return Retryable(workerv1.ReasonRegistryFailed, err)
		case resp.StatusCode == http.StatusNotFound:
			return Permanent(workerv1.ReasonSourceNotFound, err)
		default:
			return Permanent(workerv1.ReasonPushFailed, err)
		}
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return Permanent(workerv1.ReasonSourceNotFound, err)
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		// The registry asked for credentials and none were given: no
		// retry can help, setting a Secret can.
		return Permanent(workerv1.ReasonRegistryAuth, err)
	}
	if transient(err) {
		return Retryable(workerv1.ReasonRegistryFailed, err)
	}
	return Retryable(workerv1.ReasonPushFailed, err)
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
		return workerv1.Result{Error: &workerv1.Error{Reason: workerv1.ReasonDeadlineExceeded, Message: err.Error()}}
	}
	if transient(err) {
		return workerv1.Result{Error: &workerv1.Error{Reason: workerv1.ReasonRegistryFailed, Message: err.Error()}}
	}
	return workerv1.Result{Error: &workerv1.Error{Reason: workerv1.ReasonWorkerFailed, Message: err.Error()}}
}
