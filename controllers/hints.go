package controllers

import (
	"fmt"
	"strings"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// targetHints tell the user which Secret to fix when the registry refuses
// credentials. The worker cannot know the Secret's name; the spec does.
func targetHints(t v1alpha1.Target) map[string]string {
	if t.PushSecretRef == nil {
		return map[string]string{workerv1.ReasonRegistryAuth: "no spec.target.pushSecretRef is set: create a kubernetes.io/dockerconfigjson Secret for the registry and reference it there"}
	}
	return map[string]string{workerv1.ReasonRegistryAuth: fmt.Sprintf("check the credentials in Secret %q (spec.target.pushSecretRef)%s", t.PushSecretRef.Name, rerunHint)}
}

// privateHints are the hints of a Claim of a private template. They name
// the template's fields, not its Secrets: those are in the template
// namespace, which the tenant cannot read, and only an admin can fix them.
func privateHints(tpl *v1alpha1.ClaimTemplate) map[string]string {
	push := fmt.Sprintf("ClaimTemplate %s has no spec.pushSecretRef: a platform admin must set one for the registry", tpl.Name)
	if tpl.Spec.PushSecretRef != nil {
		push = fmt.Sprintf("a platform admin must check the registry credentials of ClaimTemplate %s spec.pushSecretRef", tpl.Name)
	}
	return map[string]string{
		workerv1.ReasonRegistryAuth: push,
		workerv1.ReasonTemplateAuth: fmt.Sprintf("a platform admin must check the repository credentials of ClaimTemplate %s spec.source.secretRef", tpl.Name),
	}
}

// sourceHints do the same for an Artifact's source credentials.
func sourceHints(src v1alpha1.ArtifactSource, hints map[string]string) map[string]string {
	var ref string
	switch {
	case src.HuggingFace != nil && src.HuggingFace.TokenSecretRef != nil:
		ref = fmt.Sprintf("Secret %q key %q (spec.source.huggingFace.tokenSecretRef)", src.HuggingFace.TokenSecretRef.Name, src.HuggingFace.TokenSecretRef.Key)
	case src.Git != nil && src.Git.SecretRef != nil:
		ref = fmt.Sprintf("Secret %q (spec.source.git.secretRef)", src.Git.SecretRef.Name)
	case src.OCI != nil && src.OCI.PullSecretRef != nil:
		ref = fmt.Sprintf("Secret %q (spec.source.oci.pullSecretRef)", src.OCI.PullSecretRef.Name)
	}
	if ref != "" {
		hints[workerv1.ReasonSourceAuth] = "check the credentials in " + ref + rerunHint
	} else {
		hints[workerv1.ReasonSourceAuth] = "the source needs credentials: reference a Secret in spec.source"
	}
	return hints
}

// configErrorHint names every Secret the run's pod references, with the
// field that names it, for a pod the kubelet cannot start because one (or
// a key of it) is missing. The kubelet keeps trying, so creating it is
// enough.
func configErrorHint(rights []entitlement.Right, hints map[string]string) map[string]string {
	var refs []string
	for _, r := range rights {
		if r.Attr.Resource == "secrets" {
			refs = append(refs, fmt.Sprintf("Secret %q (%s)", r.Attr.Name, r.Field))
		}
	}
	if len(refs) > 0 {
		hints[pipeline.ReasonConfigError] = "the worker pod cannot start until this exists with the expected keys: " +
			strings.Join(refs, ", ") + "; the run goes on by itself once it does"
	}
	return hints
}

// rerunHint tells how to retry once a Secret is fixed, with no spec edit.
const rerunHint = `; once fixed, run again with kubectl annotate --overwrite <kind>/<name> packline.dev/requestedAt="$(date +%s)"`
