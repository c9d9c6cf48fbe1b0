package pipeline

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// The kstatus condition helpers, for a kind's own After step (a Claim's
// delivery), so that its conditions follow the same rules as the run's.

// MarkReady sets Ready=True and clears Reconciling and Stalled.
func MarkReady(st *v1alpha1.PipelineStatus, reason, message string) { setReady(st, reason, message) }

// MarkProgress sets Ready=False and Reconciling=True.
func MarkProgress(st *v1alpha1.PipelineStatus, reason, message string) {
	setProgress(st, reason, message)
}

// MarkStalled sets Ready=False and Stalled=True.
func MarkStalled(st *v1alpha1.PipelineStatus, reason, message string) {
	setStalled(st, reason, message)
}

// MarkCondition sets one condition, redacted and bounded like the others.
func MarkCondition(st *v1alpha1.PipelineStatus, t string, s metav1.ConditionStatus, reason, message string) {
	setCondition(st, t, s, reason, message)
}
