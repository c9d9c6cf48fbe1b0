package pipeline

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// signingReasons are the worker's failures that leave a run unsigned.
var signingReasons = map[string]bool{
	workerv1.ReasonSigningKeyMissing:     true,
	workerv1.ReasonSigningKeyPassword:    true,
	workerv1.ReasonSigningKeyUnsupported: true,
	workerv1.ReasonSignaturePush:         true,
}

// recordSigning moves status.signature, status.attestation and the Signed
// condition according to a finished attempt. A failure after the push
// also records the pushed digest, so the next attempt signs it instead of
// pushing again (see pushedEarlier) and users see what is in the registry.
func recordSigning(st *v1alpha1.PipelineStatus, o Observation) {
	switch {
	case o.State == StateSucceeded && o.Result != nil && o.Result.Signature != "":
		st.Signature, st.Attestation = o.Result.Signature, o.Result.Attestation
		setCondition(st, v1alpha1.ConditionSigned, metav1.ConditionTrue, "Signed",
			fmt.Sprintf("signature %s and SLSA provenance %s attached to %s", o.Result.Signature, o.Result.Attestation, o.Result.Digest))
	case o.State == StateFailed:
		if p := o.Pushed; p != nil {
			st.Digest, st.Reference, st.SourceRevision = p.Digest, p.Reference, p.SourceRevision
			st.ImageDigest, st.ImageReference = "", "" // the view of an earlier digest, if any
		}
		if signingReasons[o.Reason] {
			setCondition(st, v1alpha1.ConditionSigned, metav1.ConditionFalse, o.Reason, o.Message)
		}
	}
}

// pushedEarlier is the artifact an earlier attempt of the current run
// pushed and failed to sign, which this attempt then only signs. It is
// read where that attempt's own worker wrote it, the termination message
// of its pod (PushedBy), and never from status: status.digest is
// writable by anyone with the status subresource, a tenant included, and
// a run whose profile signs would put the platform's key on whatever
// digest was written there. When no earlier attempt's Job and pod are left
// (deleted, collected by their TTL) the attempt pushes again: same inputs,
// same digest, and then signs what it pushed itself.
func (p *Pipeline) pushedEarlier(ctx context.Context, s *scope, attempt int32) (*workerv1.Pushed, error) {
	for a := attempt - 1; a >= 1; a-- {
		job := s.jobs[a]
		if job == nil {
			continue
		}
		pods, err := JobPods(ctx, p.Client, job)
		if err != nil {
			return nil, err
		}
		if pushed := PushedBy(job, pods); pushed != nil {
			return pushed, nil
		}
	}
	return nil, nil
}

// PushedBy is what a failed attempt's worker reported it pushed before
// its signature failed, read from the termination message of a pod that
// the Job controls (a pod is only labelled with the Job's name by choice;
// the controller reference carries the Job's UID).
func PushedBy(job *batchv1.Job, pods []corev1.Pod) *workerv1.Pushed {
	if o := Observe(job, OwnPods(job, pods)); o.State == StateFailed {
		return o.Pushed
	}
	return nil
}

// clearSigned drops the previous run's Signed condition when a run starts.
func clearSigned(st *v1alpha1.PipelineStatus) {
	apimeta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionSigned)
}
