package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

func TestExitCode(t *testing.T) {
	c := func(typ string, st metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st}
	}
	const T, F, U = metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	for _, tc := range []struct {
		name string
		s    State
		want int
	}{
		{"nothing observed yet", State{Generation: 1}, ExitProgressing},
		{"ready", State{Generation: 2, ObservedGeneration: 2, Phase: v1alpha1.PhaseSucceeded, Conditions: []metav1.Condition{c("Ready", T)}}, ExitOK},
		{"ready for an older spec", State{Generation: 3, ObservedGeneration: 2, Phase: v1alpha1.PhaseSucceeded, Conditions: []metav1.Condition{c("Ready", T)}}, ExitProgressing},
		{"stalled", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhasePending, Conditions: []metav1.Condition{c("Ready", F), c("Stalled", T)}}, ExitFailed},
		{"stalled even before observing", State{Generation: 2, ObservedGeneration: 1, Conditions: []metav1.Condition{c("Stalled", T)}}, ExitFailed},
		{"failed", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhaseFailed, Conditions: []metav1.Condition{c("Ready", F)}}, ExitFailed},
		{"running", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhaseRunning, Conditions: []metav1.Condition{c("Ready", F), c("Reconciling", T)}}, ExitProgressing},
		{"retrying", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhaseRetrying, Conditions: []metav1.Condition{c("Ready", F)}}, ExitProgressing},
		{"waiting for its template", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhasePending, Conditions: []metav1.Condition{c("Ready", F)}}, ExitProgressing},
		{"pushed, Flux applying", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhaseSucceeded, Conditions: []metav1.Condition{c("Ready", T), c("Delivered", U)}}, ExitProgressing},
		{"pushed and delivered", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhaseSucceeded, Conditions: []metav1.Condition{c("Ready", T), c("Delivered", T)}}, ExitOK},
		{"Flux failed to apply", State{Generation: 1, ObservedGeneration: 1, Phase: v1alpha1.PhaseSucceeded, Conditions: []metav1.Condition{c("Ready", T), c("Delivered", F)}}, ExitFailed},
		{"template ready", State{Generation: 1, ObservedGeneration: 1, Conditions: []metav1.Condition{c("Ready", T)}}, ExitOK},
		{"template check failed", State{Generation: 1, ObservedGeneration: 1, Conditions: []metav1.Condition{c("Ready", F)}}, ExitFailed},
		{"template checking", State{Generation: 1, ObservedGeneration: 1, Conditions: []metav1.Condition{c("Ready", F), c("Reconciling", T)}}, ExitProgressing},
	} {
		if diff := cmp.Diff(tc.want, ExitCode(tc.s)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
