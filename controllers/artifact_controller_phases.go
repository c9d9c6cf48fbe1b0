package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// The phases of an Artifact's reconcile (Cluster API's *_controller_phases.go):
// what Reconcile hands the run engine as its prepare step.

// entitle checks, before a new run starts, that the Artifact's requester
// may still use every Secret and PVC it names: the webhook checked this at
// apply time, and this is the check before use. A run already under way
// (same generation and inputs) is not checked again, so a revoked right
// never turns a finished Artifact into a failed one.
func (r *ArtifactReconciler) entitle(ctx context.Context, a *v1alpha1.Artifact, work pipeline.Work) error {
	st := a.Status
	if st.ObservedGeneration == a.Generation && st.InputsHash == work.InputsHash && st.Phase != "" {
		return nil
	}
	rights := entitlement.ArtifactRights(a)
	req, ok, err := r.seals.requester("Artifact", a, a.Spec, referenceFields(rights), "", work)
	if err != nil || !ok || r.Checker == nil {
		return err
	}
	err = r.Checker.Check(ctx, req, rights)
	var denied *entitlement.Denied
	if errors.As(err, &denied) {
		recheck := r.Pipeline.Config.BackoffCap
		return &pipeline.Blocked{Reason: ReasonEntitlementDenied, Permanent: true, RetryAfter: recheck,
			Message:    fmt.Sprintf("%v (checked again every %s)", err, recheck),
			InputsHash: pipeline.InputsHash([]byte(work.InputsHash), []byte(ReasonEntitlementDenied))}
	}
	return err
}

// maxMirrors bounds how many other Artifacts' pushes a run looks at.
const maxMirrors = 4

// mirrorIndex indexes pushed Artifacts by their source, so that finding
// another Artifact's push of the same source costs a map lookup, not a
// walk over the namespace: only Artifacts with a reference are indexed.
const mirrorIndex = "packline.dev/pushed-source"

func sourceKey(src v1alpha1.ArtifactSource) string {
	b, _ := json.Marshal(src)
	return pipeline.InputsHash(b)
}

func indexPushedSource(o client.Object) []string {
	a := o.(*v1alpha1.Artifact)
	if a.Status.Reference == "" {
		return nil
	}
	return []string{sourceKey(a.Spec.Source)}
}

// mirrorsOf are the pushed references of other Artifacts in a's namespace
// with the same source: a second Artifact mirroring a model then re-uses
// the first one's layers (mounted across repositories) instead of fetching
// and uploading them again. Only the same namespace: the worker trusts the
// layer keys recorded in those manifests, and a namespace is one tenant.
// The maxMirrors smallest names are taken, so the choice is stable. Only
// sealed pushes (see pipeline.SealedReference) count: a reference written
// into another Artifact's status by hand is neither handed on nor allowed
// to crowd out the genuine ones.
func (r *ArtifactReconciler) mirrorsOf(ctx context.Context, a *v1alpha1.Artifact) ([]string, error) {
	var list v1alpha1.ArtifactList
	if err := r.Client.List(ctx, &list, client.InNamespace(a.Namespace),
		client.MatchingFields{mirrorIndex: sourceKey(a.Spec.Source)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var picked []*v1alpha1.Artifact
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == a.Name || r.Pipeline.SealedReference(o) == "" || !equality.Semantic.DeepEqual(o.Spec.Source, a.Spec.Source) {
			continue
		}
		picked = append(picked, o)
		sort.Slice(picked, func(i, j int) bool { return picked[i].Name < picked[j].Name })
		if len(picked) > maxMirrors {
			picked = picked[:maxMirrors]
		}
	}
	out := make([]string, 0, len(picked))
	for _, o := range picked {
		out = append(out, o.Status.Reference)
	}
	return out, nil
}

// ArtifactWork is the worker's job for an Artifact. It is pure: every
// credential is referenced by Secret name, never read.
func ArtifactWork(a *v1alpha1.Artifact) (pipeline.Work, error) {
	var m pipeline.Mounts
	src := a.Spec.Source
	switch {
	case src.HuggingFace != nil && src.HuggingFace.TokenSecretRef != nil:
		m.SecretEnv(workerv1.EnvHFToken, *src.HuggingFace.TokenSecretRef)
	case src.Git != nil && src.Git.SecretRef != nil:
		m.SecretKeys("source-auth", src.Git.SecretRef.Name, workerv1.SourceAuthDir, pipeline.GitCredentialKeys...)
	case src.OCI != nil && src.OCI.PullSecretRef != nil:
		m.PullSecret(src.OCI.PullSecretRef.Name)
	case src.Volume != nil:
		m.Volumes = append(m.Volumes, corev1.Volume{Name: "source-volume", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: src.Volume.ClaimName, ReadOnly: true},
		}})
		m.Mounts = append(m.Mounts, corev1.VolumeMount{Name: "source-volume", MountPath: workerv1.SourceVolumeDir, ReadOnly: true})
		m.Source("source-volume", fmt.Sprintf("PersistentVolumeClaim %q (spec.source.volume.claimName)", src.Volume.ClaimName))
	}
	target := m.Target(a.Spec.Target, a.Spec.Target.Repository)
	specJSON, err := json.Marshal(a.Spec)
	if err != nil {
		return pipeline.Work{}, err
	}
	hints := configErrorHint(entitlement.ArtifactRights(a), sourceHints(src, targetHints(a.Spec.Target)))
	signing := resourceSigning(&m, a.Spec.Signing, resourceOf("Artifact", a), hints)
	return pipeline.Work{
		Command: "artifact",
		Spec: workerv1.Artifact{
			Source: src, Format: a.Spec.Format, Compression: a.Spec.Compression, Kitfile: a.Spec.Kitfile, Target: target,
			Signing: signing,
			// Previous is the Reconcile's to fill in: only a sealed push.
		},
		Mounts:     m,
		InputsHash: pipeline.InputsHash(specJSON),
		Tag:        target.Tag,
		Hints:      hints,
	}, nil
}
