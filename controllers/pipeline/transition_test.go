package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// TestTransition covers every (phase, event) pair: each row names the
// phases it starts from, and the test fails if a pair is missing or
// appears twice.
func TestTransition(t *testing.T) {
	policy := RetryPolicy{Limit: 3, Base: 10 * time.Second, Cap: 5 * time.Minute}
	ok := &workerv1.Result{Digest: digest, Reference: "r.example.com/m@" + digest}
	events := map[string]Event{
		"no Job":          Observed(Observation{State: StateNoJob}),
		"pod pending":     Observed(Observation{State: StatePending, Reason: ReasonWaitingForPod, Message: "waiting"}),
		"queued":          Observed(Observation{State: StateQueued, Reason: ReasonQueued, Message: "suspended"}),
		"running":         Observed(Observation{State: StateRunning, Reason: ReasonRunning, Message: "pod p running"}),
		"succeeded":       Observed(Observation{State: StateSucceeded, Reason: "Succeeded", Message: "pushed r", Result: ok}),
		"failed":          Observed(Observation{State: StateFailed, Reason: "RegistryUnavailable", Message: "503"}),
		"failed for good": Observed(Observation{State: StateFailed, Reason: "AuthDenied", Message: "401", Permanent: true}),
		"rerun requested": RerunRequested("now"),
	}
	inProgress := []v1alpha1.Phase{"", v1alpha1.PhasePending, v1alpha1.PhaseQueued, v1alpha1.PhaseRunning, v1alpha1.PhaseRetrying}
	terminal := []v1alpha1.Phase{v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed}
	all := append(append([]v1alpha1.Phase{}, inProgress...), terminal...)
	same := func(p v1alpha1.Phase) Next { return Next{Phase: p, Action: ActionNone} }

	cases := []struct {
		from  []v1alpha1.Phase
		event string
		// want is the outcome from phase p.
		want func(p v1alpha1.Phase) Next
	}{
		{inProgress, "no Job", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhasePending, Action: ActionProgress}
		}},
		{inProgress, "pod pending", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhasePending, Action: ActionProgress, Reason: ReasonWaitingForPod, Message: "waiting"}
		}},
		{inProgress, "queued", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhaseQueued, Action: ActionProgress, Reason: ReasonQueued, Message: "suspended"}
		}},
		{inProgress, "running", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhaseRunning, Action: ActionProgress, Reason: ReasonRunning, Message: "pod p running"}
		}},
		{inProgress, "succeeded", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhaseSucceeded, Action: ActionSucceed, Reason: "Succeeded", Message: "pushed r", Result: ok}
		}},
		{inProgress, "failed", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhaseRetrying, Action: ActionRetry, Reason: "RegistryUnavailable", Wait: 20 * time.Second,
				Message: "attempt 2 failed: 503; retrying in 20s"}
		}},
		{inProgress, "failed for good", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhaseFailed, Action: ActionFail, Reason: "AuthDenied", Message: "401"}
		}},
		// A finished run ignores its Job: a Job deleted by its TTL must not
		// turn Succeeded back into Pending.
		{terminal, "no Job", same},
		{terminal, "pod pending", same},
		{terminal, "queued", same},
		{terminal, "running", same},
		{terminal, "succeeded", same},
		{terminal, "failed", same},
		{terminal, "failed for good", same},
		{[]v1alpha1.Phase{v1alpha1.PhaseFailed}, "rerun requested", func(v1alpha1.Phase) Next {
			return Next{Phase: v1alpha1.PhaseRetrying, Action: ActionRetry, Reason: ReasonRerunRequested,
				Message: `packline.dev/requestedAt="now": starting attempt 3`}
		}},
		// Re-running is for a run that gave up; anything else goes on.
		{append(append([]v1alpha1.Phase{}, inProgress...), v1alpha1.PhaseSucceeded), "rerun requested", same},
	}

	seen := map[string]int{}
	for _, tc := range cases {
		for _, from := range tc.from {
			name := fmt.Sprintf("%q on %s", from, tc.event)
			seen[name]++
			t.Run(name, func(t *testing.T) {
				ev, ok := events[tc.event]
				if !ok {
					t.Fatalf("no event %q", tc.event)
				}
				got := Transition(Run{Phase: from, Attempts: 2}, ev, policy)
				if diff := cmp.Diff(tc.want(from), got); diff != "" {
					t.Errorf("Transition (-want +got):\n%s", diff)
				}
			})
		}
	}
	for _, from := range all {
		for ev := range events {
			if n := seen[fmt.Sprintf("%q on %s", from, ev)]; n != 1 {
				t.Errorf("(%q, %s) is covered %d times, want once", from, ev, n)
			}
		}
	}
}

// TestTransitionRetries follows the retry budget: spec.retryLimit retries
// after the first attempt, with doubling, capped backoff; then Failed.
func TestTransitionRetries(t *testing.T) {
	policy := RetryPolicy{Limit: 3, Base: 10 * time.Second, Cap: 25 * time.Second}
	failed := Observed(Observation{State: StateFailed, Reason: "RegistryUnavailable", Message: "503"})
	cases := []struct {
		attempts int32
		want     Next
	}{
		{1, Next{Phase: v1alpha1.PhaseRetrying, Action: ActionRetry, Reason: "RegistryUnavailable", Wait: 10 * time.Second,
			Message: "attempt 1 failed: 503; retrying in 10s"}},
		{2, Next{Phase: v1alpha1.PhaseRetrying, Action: ActionRetry, Reason: "RegistryUnavailable", Wait: 20 * time.Second,
			Message: "attempt 2 failed: 503; retrying in 20s"}},
		{3, Next{Phase: v1alpha1.PhaseRetrying, Action: ActionRetry, Reason: "RegistryUnavailable", Wait: 25 * time.Second,
			Message: "attempt 3 failed: 503; retrying in 25s"}},
		{4, Next{Phase: v1alpha1.PhaseFailed, Action: ActionFail, Reason: "RegistryUnavailable",
			Message: "503 (gave up after 4 attempts, spec.retryLimit is 3)"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("attempt %d", tc.attempts), func(t *testing.T) {
			got := Transition(Run{Phase: v1alpha1.PhaseRunning, Attempts: tc.attempts}, failed, policy)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Transition (-want +got):\n%s", diff)
			}
		})
	}
}
