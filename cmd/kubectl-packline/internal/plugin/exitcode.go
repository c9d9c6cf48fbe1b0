package plugin

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// State is what `why` decides its exit code from.
type State struct {
	Generation, ObservedGeneration int64
	// Phase is an Artifact's or Claim's status.phase; empty for a
	// ClaimTemplate, which has none.
	Phase      v1alpha1.Phase
	Conditions []metav1.Condition
}

// ExitCode is `why`'s exit code, for scripts:
//
//	0  Ready (and, for a delivered Claim, delivered)
//	1  failed or stalled: it will not get better without a change
//	   (fix what the message says, then `kubectl packline rerun`)
//	2  progressing: pending, queued, running, retrying, waiting for a
//	   template or for Flux, or the controller has not seen the latest
//	   spec yet
func ExitCode(s State) int {
	cond := func(t string) *metav1.Condition {
		for i := range s.Conditions {
			if s.Conditions[i].Type == t {
				return &s.Conditions[i]
			}
		}
		return nil
	}
	is := func(t string, st metav1.ConditionStatus) bool {
		c := cond(t)
		return c != nil && c.Status == st
	}
	switch {
	case is(v1alpha1.ConditionStalled, metav1.ConditionTrue):
		return ExitFailed
	case s.ObservedGeneration < s.Generation:
		// Whatever status says is about an older spec.
		return ExitProgressing
	case s.Phase == v1alpha1.PhaseFailed:
		return ExitFailed
	case is(v1alpha1.ConditionDelivered, metav1.ConditionFalse):
		// The delivered condition mirrors Flux's Ready: False is a
		// failed apply, Unknown one in progress.
		return ExitFailed
	case is(v1alpha1.ConditionReady, metav1.ConditionTrue):
		if c := cond(v1alpha1.ConditionDelivered); c != nil && c.Status != metav1.ConditionTrue {
			return ExitProgressing
		}
		return ExitOK
	case s.Phase == "" && is(v1alpha1.ConditionReady, metav1.ConditionFalse) && !is(v1alpha1.ConditionReconciling, metav1.ConditionTrue):
		// A ClaimTemplate whose validation or check render failed.
		return ExitFailed
	}
	return ExitProgressing
}
