package claims

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// BoundArtifacts maps each value an Artifact binding reads to the Artifact
// name the Claim gives it; values that are absent or not strings are left
// to the schema.
func BoundArtifacts(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate) map[string]string {
	values := map[string]any{}
	if c.Spec.Values != nil && len(c.Spec.Values.Raw) > 0 {
		_ = json.Unmarshal(c.Spec.Values.Raw, &values)
	}
	out := map[string]string{}
	for _, b := range tpl.Spec.Parameters {
		if b.Kind != v1alpha1.BindingArtifact {
			continue
		}
		if name, ok := values[b.Value].(string); ok && name != "" {
			out[b.Value] = name
		}
	}
	return out
}

// ArtifactNotReady says which bound Artifact a Claim waits for.
type ArtifactNotReady struct {
	Value, Name, Why string
}

func (e *ArtifactNotReady) Error() string {
	return fmt.Sprintf("spec.values.%s: Artifact %s %s; the Claim renders once it is Ready", e.Value, e.Name, e.Why)
}

// ResolveArtifacts rewrites a Claim's Artifact bindings for the worker: each
// becomes a Field or Env binding, and its value the Artifact's
// digest-pinned reference. artifacts holds the Claim namespace's Artifacts
// by name (a missing one is absent). It returns the values and bindings to
// render with, the references in value order (for the inputs hash), or
// *ArtifactNotReady.
func ResolveArtifacts(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, artifacts map[string]*v1alpha1.Artifact) (*apiextensionsv1.JSON, []v1alpha1.ParameterBinding, []string, error) {
	params := make([]v1alpha1.ParameterBinding, len(tpl.Spec.Parameters))
	for i, b := range tpl.Spec.Parameters {
		// The worker knows Field and Env; an unset value is skipped there.
		if b.Kind == v1alpha1.BindingArtifact {
			b.Kind = v1alpha1.BindingField
			if b.EnvName != "" {
				b.Kind = v1alpha1.BindingEnv
			}
		}
		params[i] = b
	}
	bound := BoundArtifacts(c, tpl)
	if len(bound) == 0 {
		return c.Spec.Values, params, nil, nil
	}
	values := map[string]any{}
	if err := json.Unmarshal(c.Spec.Values.Raw, &values); err != nil {
		return nil, nil, nil, err
	}
	keys := make([]string, 0, len(bound))
	for k := range bound {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	views := map[string]v1alpha1.ArtifactView{}
	for _, b := range tpl.Spec.Parameters {
		if b.Kind == v1alpha1.BindingArtifact {
			views[b.Value] = b.ArtifactView
		}
	}
	var refs []string
	for _, k := range keys {
		a := artifacts[bound[k]]
		switch {
		case a == nil:
			return nil, nil, nil, &ArtifactNotReady{Value: k, Name: bound[k], Why: "does not exist in namespace " + c.Namespace}
		case a.Status.Reference == "" || a.Status.ObservedGeneration != a.Generation || a.Status.Phase != v1alpha1.PhaseSucceeded:
			return nil, nil, nil, &ArtifactNotReady{Value: k, Name: bound[k], Why: fmt.Sprintf("is not Ready (phase %q)", a.Status.Phase)}
		}
		ref, err := boundReference(a, views[k])
		if err != nil {
			return nil, nil, nil, &ArtifactNotReady{Value: k, Name: bound[k], Why: err.Error()}
		}
		values[k] = ref
		refs = append(refs, k+"="+ref)
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return nil, nil, nil, err
	}
	return &apiextensionsv1.JSON{Raw: raw}, params, refs, nil
}

// boundReference is the reference of a's view: its image view
// (status.imageReference) unless view is Artifact, or status.reference
// when a has no image view (pushed before they existed, or an OCI copy of
// something that is not a model).
//
// Both fields are status, which the Artifact's owner can write: the
// rendered reference is the tenant's own claim on their own namespace's
// Artifact, exactly as status.reference always was. It is only checked to
// lie in status.reference's repository, so a binding never names another
// repository than the Artifact's.
func boundReference(a *v1alpha1.Artifact, view v1alpha1.ArtifactView) (string, error) {
	st := a.Status
	if view == v1alpha1.ArtifactViewArtifact || st.ImageReference == "" {
		return st.Reference, nil
	}
	repo, _, _ := strings.Cut(st.Reference, "@")
	imageRepo, dgst, ok := strings.Cut(st.ImageReference, "@")
	if !ok || imageRepo != repo || !strings.HasPrefix(dgst, "sha256:") {
		return "", fmt.Errorf("has status.imageReference %q, not <repository of status.reference>@sha256:…", st.ImageReference)
	}
	return st.ImageReference, nil
}

// InitPullOf is what the render needs for the template's Artifact bindings
// with mount InitPull: the worker image its init containers run, and which
// bound Artifacts' own targets are plain HTTP or skip TLS verification. It
// is nil when the template has no such binding, so other renders' specs
// stay as they were.
func InitPullOf(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, artifacts map[string]*v1alpha1.Artifact, workerImage string) *workerv1.InitPull {
	var out *workerv1.InitPull
	bound := BoundArtifacts(c, tpl)
	for _, b := range tpl.Spec.Parameters {
		if b.Kind != v1alpha1.BindingArtifact || b.Mount != v1alpha1.ArtifactMountInitPull {
			continue
		}
		if out == nil {
			out = &workerv1.InitPull{Image: workerImage}
		}
		a := artifacts[bound[b.Value]]
		if a == nil {
			continue
		}
		if a.Spec.Target.PlainHTTP {
			out.PlainHTTP = append(out.PlainHTTP, b.Value)
		}
		if a.Spec.Target.InsecureSkipTLSVerify {
			out.Insecure = append(out.Insecure, b.Value)
		}
	}
	return out
}
