package pipeline

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// The kstatus condition helpers, for a kind's own After step (a Claim's
// delivery), so that its conditions follow the same rules as the run's.

// Readiness is what a kind's own step says of the Ready condition.
type Readiness struct {
	// Ready: done (Ready=True); else Stalled, or in progress (Reconciling).
	Ready, Stalled  bool
	Reason, Message string
}

// MarkReadiness is the one way a kind's own step writes Ready: Ready=True
// clears Reconciling and Stalled; otherwise Ready=False with Stalled=True
// or Reconciling=True.
func MarkReadiness(st *v1alpha1.PipelineStatus, r Readiness) {
	switch {
	case r.Ready:
		setReady(st, r.Reason, r.Message)
	case r.Stalled:
		setStalled(st, r.Reason, r.Message)
	default:
		setProgress(st, r.Reason, r.Message)
	}
}

// MarkCondition sets one condition, redacted and bounded like the others.
func MarkCondition(st *v1alpha1.PipelineStatus, t string, s metav1.ConditionStatus, reason, message string) {
	setCondition(st, t, s, reason, message)
}
