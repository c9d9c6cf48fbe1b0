package pipeline

import (
	"errors"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Reasons for a child object the API server refused (a ResourceQuota, a
// LimitRange, an admission policy). The reconcile is retried with backoff.
const (
	ReasonWorkspaceRejected = "WorkspaceRejected"
	ReasonJobRejected       = "JobRejected"
	// ReasonJobConflict: a Job of the name packline would create exists
	// and was not made for this run; packline never adopts it.
	ReasonJobConflict    = "JobConflict"
	ReasonReconcileError = "ReconcileError"
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

// Waiting is a step's answer when the run must wait for something outside
// it (a ServiceAccount, a namespace, a predecessor's Job being collected, a
// template): the run is Pending and Reconciling, the step list stops, and
// the reconcile comes back after RetryAfter (zero: when a watch fires). It
// is no reconcile error: nothing is logged or retried with error backoff.
type Waiting struct {
	Reason, Message string
	RetryAfter      time.Duration
}

func (e *Waiting) Error() string { return e.Reason + ": " + e.Message }

// Stalling is a step's answer when the run cannot go on until a person
// changes its input (a denied entitlement, an invalid spec): the run is
// Failed and Stalled until the spec changes or a re-run is requested; it is
// looked at again after RetryAfter, for a cause no watch sees fixed.
type Stalling struct {
	Reason, Message string
	RetryAfter      time.Duration
}

func (e *Stalling) Error() string { return e.Reason + ": " + e.Message }

// hold turns a Waiting or Stalling answer of a step into status, through
// Transition, and stops the step list; ok is false for any other error.
func (p *Pipeline) hold(s *scope, err error) (res ctrl.Result, ok bool) {
	var w *Waiting
	var st *Stalling
	switch {
	case errors.As(err, &w):
		p.enact(s, Transition(s.run(), Waited(w.Reason, w.Message), RetryPolicy{}))
		res.RequeueAfter = w.RetryAfter
	case errors.As(err, &st):
		p.enact(s, Transition(s.run(), Stalled(st.Reason, st.Message), RetryPolicy{}))
		res.RequeueAfter = st.RetryAfter
	default:
		return ctrl.Result{}, false
	}
	s.stop = true
	return res, true
}

// reportStepError puts a step's error into the Ready condition, keeping the
// phase: the run has not failed, it cannot go on until the cause is fixed.
func (p *Pipeline) reportStepError(s *scope, err error) {
	p.enact(s, Transition(s.run(), StepFailed(err), RetryPolicy{}))
}
