package pipeline

import (
	"errors"

	"github.com/packline/packline/api/v1alpha1"
)

// Reasons for a child object the API server refused (a ResourceQuota, a
// LimitRange, an admission policy). The reconcile is retried with backoff.
const (
	ReasonWorkspaceRejected = "WorkspaceRejected"
	ReasonJobRejected       = "JobRejected"
	ReasonReconcileError    = "ReconcileError"
)

// StepError is a reconcile step's error with the reason status shows.
type StepError struct {
	Reason string
	Err    error
	// Stall marks a cause that only a person can remove (a conflicting
	// object): status says Stalled, not Reconciling. The reconcile is
	// still retried with backoff, so the run goes on once it is removed.
	Stall bool
}

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// reportStepError puts a step's error into the Ready condition, keeping the
// phase: the run has not failed, it cannot go on until the cause is fixed.
func reportStepError(s *scope, err error) {
	if s.status.Phase == v1alpha1.PhaseSucceeded {
		return // a finished run's result stands; the error is retried
	}
	reason := ReasonReconcileError
	var se *StepError
	if errors.As(err, &se) {
		reason = se.Reason
	}
	if s.status.Phase == "" {
		s.status.Phase = v1alpha1.PhasePending
	}
	if se != nil && se.Stall {
		setStalled(s.status, reason, err.Error())
		return
	}
	setProgress(s.status, reason, err.Error())
}
