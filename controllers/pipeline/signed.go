package pipeline

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/result"
)

// signingReasons are the worker's failures that leave a run unsigned.
var signingReasons = map[string]bool{
	failure.ReasonSigningKeyMissing:     true,
	failure.ReasonSigningKeyPassword:    true,
	failure.ReasonSigningKeyUnsupported: true,
	failure.ReasonSignaturePush:         true,
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
		}
		if signingReasons[o.Reason] {
			setCondition(st, v1alpha1.ConditionSigned, metav1.ConditionFalse, o.Reason, o.Message)
		}
	}
}

// pushedEarlier is the artifact an earlier attempt of the current run
// pushed and failed to sign. startRun clears status.digest when a run
// starts, so a digest in a run that has not succeeded can only be that.
func pushedEarlier(st *v1alpha1.PipelineStatus) *result.Pushed {
	if st.Digest == "" || st.Phase == v1alpha1.PhaseSucceeded {
		return nil
	}
	return &result.Pushed{Digest: st.Digest, Reference: st.Reference, SourceRevision: st.SourceRevision}
}

// clearSigned drops the previous run's Signed condition when a run starts.
func clearSigned(st *v1alpha1.PipelineStatus) {
	apimeta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionSigned)
}
