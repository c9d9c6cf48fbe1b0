package pipeline

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
)

// setReady marks a finished, successful run (kstatus: Ready only).
func setReady(st *v1alpha1.PipelineStatus, reason, message string) {
	setCondition(st, v1alpha1.ConditionReady, metav1.ConditionTrue, reason, message)
	apimeta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
	apimeta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
}

// setProgress marks a run in progress: Reconciling, not Ready.
func setProgress(st *v1alpha1.PipelineStatus, reason, message string) {
	setCondition(st, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	setCondition(st, v1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, message)
	apimeta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
}

// setStalled marks a run that will not progress without a change: Stalled.
func setStalled(st *v1alpha1.PipelineStatus, reason, message string) {
	setCondition(st, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	setCondition(st, v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, message)
	apimeta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
}

func setCondition(st *v1alpha1.PipelineStatus, t string, s metav1.ConditionStatus, reason, message string) {
	if reason == "" {
		reason = string(st.Phase)
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		// Every message reaches status and, on a phase change, an event:
		// it is redacted here, whatever produced it (the worker redacts too).
		Type: t, Status: s, Reason: reason, Message: truncate(redact.String(message), 32*1024), ObservedGeneration: st.ObservedGeneration,
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// finish patches status once (only when it changed), emits an event on a
// phase change, and records metrics.
func (p *Pipeline) finish(ctx context.Context, s *scope) error {
	st := s.status
	if st.Phase == v1alpha1.PhasePending && apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady) == nil {
		setProgress(st, "Pending", "run is starting")
	}
	dropProgress(st, s.before)
	if equality.Semantic.DeepEqual(st, s.before) && !extraChanged(s) {
		return nil
	}
	if err := p.Client.Status().Patch(ctx, s.obj, client.MergeFrom(s.base)); err != nil {
		return fmt.Errorf("patching status: %w", err)
	}
	p.patched.record(s.obj, s.base.GetResourceVersion())
	if st.Phase != s.before.Phase || st.ObservedGeneration != s.before.ObservedGeneration {
		p.phaseChanged(s)
	}
	return nil
}

func extraChanged(s *scope) bool {
	now, ok := s.obj.(ExtraStatus)
	if !ok {
		return false
	}
	return !equality.Semantic.DeepEqual(now.GetExtraStatus(), s.base.(ExtraStatus).GetExtraStatus())
}

func (p *Pipeline) phaseChanged(s *scope) {
	st := s.status
	ready := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	reason, note := string(st.Phase), string(st.Phase)
	if ready != nil {
		reason, note = ready.Reason, ready.Message
	}
	eventType := corev1.EventTypeNormal
	switch st.Phase {
	case v1alpha1.PhaseFailed, v1alpha1.PhaseRetrying:
		eventType = corev1.EventTypeWarning
	}
	if p.Recorder != nil {
		p.Recorder.Eventf(s.obj, nil, eventType, reason, string(st.Phase), "%s", note)
	}
	recordPhase(p.Kind, st)
}
