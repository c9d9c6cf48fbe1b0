package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// The run's state machine. Transition is pure, so every (phase, event) pair
// is a row in a table test; the reconcile steps and the cleanup only carry
// out what it decides.

// Run is where a run stands.
type Run struct {
	// Phase is status.phase. The cleanup keeps no phase: empty, like any
	// phase but Succeeded and Failed, means the run is in progress.
	Phase v1alpha1.Phase
	// Attempts made so far, the current one included.
	Attempts int32
}

// RetryPolicy bounds the retries of a run.
type RetryPolicy struct {
	// Limit is the retries allowed after the first attempt (spec.retryLimit).
	Limit int32
	// Base doubles per attempt up to Cap.
	Base, Cap time.Duration
}

// retryPolicy is spec.retryLimit, else the manager's default, with the
// manager's backoff.
func (p *Pipeline) retryPolicy(ps *v1alpha1.PipelineSpec) RetryPolicy {
	limit := p.Config.DefaultRetryLimit
	if ps.RetryLimit != nil {
		limit = *ps.RetryLimit
	}
	return RetryPolicy{Limit: limit, Base: p.Config.BackoffBase, Cap: p.Config.BackoffCap}
}

// Event is what a reconcile saw happen to a run: the current attempt's Job
// observed (Observed), a new attempt asked for (RerunRequested), a new
// attempt's Job made (AttemptStarted), or a step that must wait (Waited),
// cannot go on (Stalled) or failed (StepFailed).
type Event struct {
	observed    *Observation
	requestedAt string
	attempt     int32
	// hold is a step's Waiting or Stalling answer, stall telling which.
	hold  *Observation
	stall bool
	// stepErr is a step's error (see StepError).
	stepErr error
}

// AttemptStarted: the Job of attempt n exists; the run is Pending until it
// is observed.
func AttemptStarted(n int32) Event { return Event{attempt: n} }

// Waited: a step waits for something outside the run (see Waiting).
func Waited(reason, message string) Event {
	return Event{hold: &Observation{Reason: reason, Message: message}}
}

// Stalled: the run cannot go on until its input changes (see Stalling).
func Stalled(reason, message string) Event {
	return Event{hold: &Observation{Reason: reason, Message: message}, stall: true}
}

// StepFailed: a reconcile step returned err (see StepError).
func StepFailed(err error) Event { return Event{stepErr: err} }

// Observed is an observation of the current attempt's Job.
func Observed(o Observation) Event { return Event{observed: &o} }

// RerunRequested is a new packline.dev/requestedAt value.
func RerunRequested(at string) Event { return Event{requestedAt: at} }

// Action is what the reconciler must do after a transition.
type Action string

const (
	// ActionNone: the event changes nothing in this phase.
	ActionNone Action = "None"
	// ActionProgress: report the run in progress (Reconciling).
	ActionProgress Action = "Progress"
	// ActionSucceed: record the result (Ready).
	ActionSucceed Action = "Succeed"
	// ActionRetry: start the next attempt after Next.Wait (Reconciling).
	ActionRetry Action = "Retry"
	// ActionFail: give up (Stalled) until a spec change or a re-run request.
	ActionFail Action = "Fail"
	// ActionStart: record Next.Attempt as the current attempt (Pending).
	ActionStart Action = "Start"
	// ActionStall: report a cause only a person can remove (Stalled),
	// keeping the phase; the step is retried with backoff.
	ActionStall Action = "Stall"
)

// Next is the outcome of a transition.
type Next struct {
	Phase   v1alpha1.Phase
	Action  Action
	Reason  string
	Message string
	// Wait is the backoff before the next attempt, for ActionRetry.
	Wait time.Duration
	// Result is the worker's, for ActionSucceed.
	Result *workerv1.Result
	// Attempt is the attempt started, for ActionStart.
	Attempt int32
}

// Transition moves a run on one event. Succeeded and Failed are terminal
// for observations: only a new generation (which resets the run) or a
// re-run request of a Failed run starts another attempt.
func Transition(run Run, ev Event, policy RetryPolicy) Next {
	terminal := run.Phase == v1alpha1.PhaseSucceeded || run.Phase == v1alpha1.PhaseFailed
	stay := Next{Phase: run.Phase, Action: ActionNone}
	switch {
	case ev.hold != nil && ev.stall:
		return Next{Phase: v1alpha1.PhaseFailed, Action: ActionFail, Reason: ev.hold.Reason, Message: ev.hold.Message}
	case ev.hold != nil:
		return Next{Phase: v1alpha1.PhasePending, Action: ActionProgress, Reason: ev.hold.Reason, Message: ev.hold.Message}
	case ev.stepErr != nil:
		return stepFailed(run, ev.stepErr)
	case ev.attempt > 0:
		return Next{Phase: v1alpha1.PhasePending, Action: ActionStart, Attempt: ev.attempt}
	}
	if ev.observed == nil {
		if run.Phase != v1alpha1.PhaseFailed {
			return stay
		}
		// One more attempt, numbered after the last, so its Job is new.
		return Next{Phase: v1alpha1.PhaseRetrying, Action: ActionRetry, Reason: ReasonRerunRequested,
			Message: fmt.Sprintf("%s=%q: starting attempt %d", v1alpha1.AnnotationRequestedAt, ev.requestedAt, run.Attempts+1)}
	}
	if terminal {
		return stay
	}
	o := *ev.observed
	switch o.State {
	case StateNoJob, StatePending:
		return Next{Phase: v1alpha1.PhasePending, Action: ActionProgress, Reason: o.Reason, Message: o.Message}
	case StateQueued:
		return Next{Phase: v1alpha1.PhaseQueued, Action: ActionProgress, Reason: o.Reason, Message: o.Message}
	case StateRunning:
		return Next{Phase: v1alpha1.PhaseRunning, Action: ActionProgress, Reason: o.Reason, Message: o.Message}
	case StateSucceeded:
		return Next{Phase: v1alpha1.PhaseSucceeded, Action: ActionSucceed, Reason: "Succeeded", Message: o.Message, Result: o.Result}
	case StateFailed:
		return failed(run, o, policy)
	}
	return Next{Phase: run.Phase, Action: ActionProgress, Reason: o.Reason, Message: o.Message}
}

// failed retries a failed attempt with backoff, unless the failure is
// permanent (bad input, denied credentials) or the retries are spent.
func failed(run Run, o Observation, policy RetryPolicy) Next {
	if o.Permanent {
		return Next{Phase: v1alpha1.PhaseFailed, Action: ActionFail, Reason: o.Reason, Message: o.Message}
	}
	if run.Attempts > policy.Limit {
		return Next{Phase: v1alpha1.PhaseFailed, Action: ActionFail, Reason: o.Reason,
			Message: fmt.Sprintf("%s (gave up after %d attempts, spec.retryLimit is %d)", o.Message, run.Attempts, policy.Limit)}
	}
	wait := Backoff(run.Attempts, policy.Base, policy.Cap)
	return Next{Phase: v1alpha1.PhaseRetrying, Action: ActionRetry, Reason: o.Reason, Wait: wait,
		Message: fmt.Sprintf("attempt %d failed: %s; retrying in %s", run.Attempts, o.Message, wait)}
}

// Backoff is base·2^(attempt-1), capped.
func Backoff(attempt int32, base, cap_ time.Duration) time.Duration {
	d := base
	for i := int32(1); i < attempt && d < cap_; i++ {
		d *= 2
	}
	return min(d, cap_)
}

// stepFailed keeps the phase (Pending for a run not yet started) and puts
// the error in Ready: the run has not failed, it cannot go on until the
// cause is fixed. A finished run's result stands; the error is retried.
func stepFailed(run Run, err error) Next {
	if run.Phase == v1alpha1.PhaseSucceeded {
		return Next{Phase: run.Phase, Action: ActionNone}
	}
	reason, stall := ReasonReconcileError, false
	var se *StepError
	if errors.As(err, &se) {
		reason, stall = se.Reason, se.Stall
	}
	next := Next{Phase: run.Phase, Action: ActionProgress, Reason: reason, Message: err.Error()}
	if next.Phase == "" {
		next.Phase = v1alpha1.PhasePending
	}
	if stall {
		next.Action = ActionStall
	}
	return next
}
