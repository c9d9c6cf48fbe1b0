package wrappers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
)

// The builders below start from a small valid object, so that a test names
// only what it is about. Each wrapper embeds its object: a field with no
// setter is set directly (w.Spec.X = ...).

// ArtifactWrapper builds an Artifact.
type ArtifactWrapper struct{ v1alpha1.Artifact }

// MakeArtifact starts an Artifact of the Hugging Face repo acme/tiny at
// main, pushed to registry.example.com/acme/tiny:v1.
func MakeArtifact(name, ns string) *ArtifactWrapper {
	return &ArtifactWrapper{v1alpha1.Artifact{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ArtifactSpec{
			Source: v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "acme/tiny", Revision: "main"}},
			Target: v1alpha1.Target{Repository: "registry.example.com/acme/tiny", Tag: "v1"},
		},
	}}
}

// Obj returns the Artifact.
func (w *ArtifactWrapper) Obj() *v1alpha1.Artifact { return &w.Artifact }

// HF sets a Hugging Face source of repo, at main.
func (w *ArtifactWrapper) HF(repo string) *ArtifactWrapper {
	w.Spec.Source = v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: repo, Revision: "main"}}
	return w
}

// HFEndpoint points the Hugging Face source at another hub.
func (w *ArtifactWrapper) HFEndpoint(url string) *ArtifactWrapper {
	w.Spec.Source.HuggingFace.Endpoint = url
	return w
}

// HFToken reads the Hugging Face token from key "token" of a Secret.
func (w *ArtifactWrapper) HFToken(secret string) *ArtifactWrapper {
	w.Spec.Source.HuggingFace.TokenSecretRef = &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "token"}
	return w
}

// Git sets a Git source.
func (w *ArtifactWrapper) Git(url, ref, path string) *ArtifactWrapper {
	w.Spec.Source = v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: url, Ref: ref, Path: path}}
	return w
}

// GitSecret sets the Git source's credentials Secret.
func (w *ArtifactWrapper) GitSecret(secret string) *ArtifactWrapper {
	w.Spec.Source.Git.SecretRef = &corev1.LocalObjectReference{Name: secret}
	return w
}

// HTTP sets an HTTP(S) source.
func (w *ArtifactWrapper) HTTP(url string) *ArtifactWrapper {
	w.Spec.Source = v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: url}}
	return w
}

// SHA256 sets the HTTP source's expected digest (hex).
func (w *ArtifactWrapper) SHA256(sum string) *ArtifactWrapper {
	w.Spec.Source.HTTP.SHA256 = sum
	return w
}

// OCI sets an OCI artifact source.
func (w *ArtifactWrapper) OCI(ref string) *ArtifactWrapper {
	w.Spec.Source = v1alpha1.ArtifactSource{OCI: &v1alpha1.OCISource{Reference: ref}}
	return w
}

// PullSecret sets the OCI source's dockerconfigjson Secret.
func (w *ArtifactWrapper) PullSecret(secret string) *ArtifactWrapper {
	w.Spec.Source.OCI.PullSecretRef = &corev1.LocalObjectReference{Name: secret}
	return w
}

// Volume sets a PVC source.
func (w *ArtifactWrapper) Volume(pvc string) *ArtifactWrapper {
	w.Spec.Source = v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: pvc}}
	return w
}

// Repository sets the target repository.
func (w *ArtifactWrapper) Repository(repo string) *ArtifactWrapper {
	w.Spec.Target.Repository = repo
	return w
}

// Tag sets the target tag.
func (w *ArtifactWrapper) Tag(tag string) *ArtifactWrapper { w.Spec.Target.Tag = tag; return w }

// PlainHTTP pushes without TLS.
func (w *ArtifactWrapper) PlainHTTP() *ArtifactWrapper { w.Spec.Target.PlainHTTP = true; return w }

// PushSecret sets the target's dockerconfigjson Secret.
func (w *ArtifactWrapper) PushSecret(secret string) *ArtifactWrapper {
	w.Spec.Target.PushSecretRef = &corev1.LocalObjectReference{Name: secret}
	return w
}

// CASecret sets the target's CA bundle Secret.
func (w *ArtifactWrapper) CASecret(secret string) *ArtifactWrapper {
	w.Spec.Target.CASecretRef = &corev1.LocalObjectReference{Name: secret}
	return w
}

// RetryLimit sets spec.retryLimit.
func (w *ArtifactWrapper) RetryLimit(n int32) *ArtifactWrapper { w.Spec.RetryLimit = &n; return w }

// Queue sets spec.queueName.
func (w *ArtifactWrapper) Queue(q string) *ArtifactWrapper { w.Spec.QueueName = q; return w }

// Format sets spec.format.
func (w *ArtifactWrapper) Format(f v1alpha1.PackFormat) *ArtifactWrapper { w.Spec.Format = f; return w }

// Timeout sets spec.timeout.
func (w *ArtifactWrapper) Timeout(d time.Duration) *ArtifactWrapper {
	w.Spec.Timeout = &metav1.Duration{Duration: d}
	return w
}

// Workspace sets spec.workspace.size.
func (w *ArtifactWrapper) Workspace(size string) *ArtifactWrapper {
	w.Spec.Workspace = &v1alpha1.WorkspaceSpec{Size: ptr.To(resource.MustParse(size))}
	return w
}

// DeletionPolicy sets spec.deletionPolicy.
func (w *ArtifactWrapper) DeletionPolicy(p v1alpha1.DeletionPolicy) *ArtifactWrapper {
	w.Spec.DeletionPolicy = p
	return w
}

// SigningKey signs the Artifact with the cosign key in this Secret.
func (w *ArtifactWrapper) SigningKey(secret string) *ArtifactWrapper {
	w.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: secret}}
	return w
}

// Label adds a label.
func (w *ArtifactWrapper) Label(k, v string) *ArtifactWrapper {
	w.Labels = with(w.Labels, k, v)
	return w
}

// ClaimWrapper builds a Claim.
type ClaimWrapper struct{ v1alpha1.Claim }

// MakeClaim starts a Claim of template tpl, with no values.
func MakeClaim(name, ns, tpl string) *ClaimWrapper {
	return &ClaimWrapper{v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ClaimSpec{TemplateRef: v1alpha1.TemplateReference{Name: tpl}}}}
}

// Obj returns the Claim.
func (w *ClaimWrapper) Obj() *v1alpha1.Claim { return &w.Claim }

// Values sets spec.values from JSON.
func (w *ClaimWrapper) Values(json string) *ClaimWrapper {
	w.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(json)}
	return w
}

// Exposure sets spec.exposure.type.
func (w *ClaimWrapper) Exposure(e v1alpha1.ExposureType) *ClaimWrapper {
	w.Spec.Exposure.Type = e
	return w
}

// NodePort exposes the Claim as a NodePort on port.
func (w *ClaimWrapper) NodePort(port int32) *ClaimWrapper {
	w.Spec.Exposure.Type, w.Spec.Exposure.NodePort = v1alpha1.ExposureNodePort, &port
	return w
}

// Host sets spec.exposure.host.
func (w *ClaimWrapper) Host(h string) *ClaimWrapper { w.Spec.Exposure.Host = h; return w }

// Target sets spec.target.
func (w *ClaimWrapper) Target(t v1alpha1.Target) *ClaimWrapper { w.Spec.Target = &t; return w }

// PushSecret sets spec.target.pushSecretRef.
func (w *ClaimWrapper) PushSecret(secret string) *ClaimWrapper {
	if w.Spec.Target == nil {
		w.Spec.Target = &v1alpha1.Target{}
	}
	w.Spec.Target.PushSecretRef = &corev1.LocalObjectReference{Name: secret}
	return w
}

// DeletionPolicy sets spec.deletionPolicy.
func (w *ClaimWrapper) DeletionPolicy(p v1alpha1.DeletionPolicy) *ClaimWrapper {
	w.Spec.DeletionPolicy = p
	return w
}

// Annotation adds an annotation.
func (w *ClaimWrapper) Annotation(k, v string) *ClaimWrapper {
	w.Annotations = with(w.Annotations, k, v)
	return w
}

// ClaimTemplateWrapper builds a ClaimTemplate.
type ClaimTemplateWrapper struct{ v1alpha1.ClaimTemplate }

// MakeClaimTemplate starts the code-server template of the fixture
// repository (test/fixtures/templates): a Deployment, Service and PVC, a
// replicas value of at most 3 bound to the Deployment, and a repository
// prefix. Access is the API's default (the claim verb is required, any
// namespace).
func MakeClaimTemplate(name string) *ClaimTemplateWrapper {
	return &ClaimTemplateWrapper{v1alpha1.ClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClaimTemplateSpec{
		Source:       v1alpha1.TemplateSource{URL: "https://git.example.com/tpl.git", Ref: "main", Path: "apps/code-server/base"},
		Kinds:        []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
		ValuesSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"replicas":{"type":"integer","maximum":3}}}`)},
		Parameters: []v1alpha1.ParameterBinding{{Value: "replicas", Kind: v1alpha1.BindingReplicas,
			Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "code-server"}}},
		RepositoryPrefix: "registry.example.com/claims",
	}}}
}

// Obj returns the ClaimTemplate.
func (w *ClaimTemplateWrapper) Obj() *v1alpha1.ClaimTemplate { return &w.ClaimTemplate }

// Source sets the Git repository, ref and path.
func (w *ClaimTemplateWrapper) Source(url, ref, path string) *ClaimTemplateWrapper {
	w.Spec.Source.URL, w.Spec.Source.Ref, w.Spec.Source.Path = url, ref, path
	return w
}

// Private makes the template read its repository with repoSecret and push
// with pushSecret, both in the template namespace.
func (w *ClaimTemplateWrapper) Private(repoSecret, pushSecret string) *ClaimTemplateWrapper {
	w.Spec.Source.SecretRef = &corev1.LocalObjectReference{Name: repoSecret}
	if pushSecret != "" {
		w.Spec.PushSecretRef = &corev1.LocalObjectReference{Name: pushSecret}
	}
	return w
}

// Kinds replaces the kinds the template may render.
func (w *ClaimTemplateWrapper) Kinds(k ...v1alpha1.RenderedKind) *ClaimTemplateWrapper {
	w.Spec.Kinds = k
	return w
}

// Schema replaces the values schema (JSON).
func (w *ClaimTemplateWrapper) Schema(json string) *ClaimTemplateWrapper {
	w.Spec.ValuesSchema = &apiextensionsv1.JSON{Raw: []byte(json)}
	return w
}

// Parameters replaces the parameter bindings.
func (w *ClaimTemplateWrapper) Parameters(p ...v1alpha1.ParameterBinding) *ClaimTemplateWrapper {
	w.Spec.Parameters = p
	return w
}

// Service sets the Service the exposures apply to.
func (w *ClaimTemplateWrapper) Service(name string) *ClaimTemplateWrapper {
	w.Spec.Service = name
	return w
}

// Exposures replaces the exposure types on offer.
func (w *ClaimTemplateWrapper) Exposures(types ...v1alpha1.ExposureType) *ClaimTemplateWrapper {
	w.Spec.Exposures = nil
	for _, t := range types {
		w.Spec.Exposures = append(w.Spec.Exposures, v1alpha1.ExposureOption{Type: t})
	}
	return w
}

// Expose adds an exposure type on offer, with its Kustomize component.
func (w *ClaimTemplateWrapper) Expose(t v1alpha1.ExposureType, component string) *ClaimTemplateWrapper {
	w.Spec.Exposures = append(w.Spec.Exposures, v1alpha1.ExposureOption{Type: t, Component: component})
	return w
}

// RepositoryPrefix sets the prefix of the Claims' target repositories.
func (w *ClaimTemplateWrapper) RepositoryPrefix(p string) *ClaimTemplateWrapper {
	w.Spec.RepositoryPrefix = p
	return w
}

// ForNamespaces lets only namespaces with these labels claim it.
func (w *ClaimTemplateWrapper) ForNamespaces(labels map[string]string) *ClaimTemplateWrapper {
	w.Spec.Access.NamespaceSelector = &metav1.LabelSelector{MatchLabels: labels}
	return w
}

// Groups lets only these groups claim it.
func (w *ClaimTemplateWrapper) Groups(g ...string) *ClaimTemplateWrapper {
	w.Spec.Access.Groups = g
	return w
}

// Open lets anyone who may create Claims claim it: no claim verb needed.
func (w *ClaimTemplateWrapper) Open() *ClaimTemplateWrapper {
	w.Spec.Access.RequireClaimVerb = ptr.To(false)
	return w
}

// EnvironmentProfileWrapper builds an EnvironmentProfile.
type EnvironmentProfileWrapper struct{ v1alpha1.EnvironmentProfile }

// MakeEnvironmentProfile starts a profile for the namespaces with these
// labels, which sets nothing yet.
func MakeEnvironmentProfile(name string, namespaceLabels map[string]string) *EnvironmentProfileWrapper {
	return &EnvironmentProfileWrapper{v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.EnvironmentProfileSpec{NamespaceSelector: metav1.LabelSelector{MatchLabels: namespaceLabels}}}}
}

// Obj returns the EnvironmentProfile.
func (w *EnvironmentProfileWrapper) Obj() *v1alpha1.EnvironmentProfile { return &w.EnvironmentProfile }

// Priority sets spec.priority: the highest matching profile wins.
func (w *EnvironmentProfileWrapper) Priority(p int32) *EnvironmentProfileWrapper {
	w.Spec.Priority = p
	return w
}

// StorageClass sets spec.storageClassName.
func (w *EnvironmentProfileWrapper) StorageClass(c string) *EnvironmentProfileWrapper {
	w.Spec.StorageClassName = c
	return w
}

// WorkspaceSize sets spec.workspaceSize.
func (w *EnvironmentProfileWrapper) WorkspaceSize(q string) *EnvironmentProfileWrapper {
	w.Spec.WorkspaceSize = ptr.To(resource.MustParse(q))
	return w
}

// WorkerResources sets spec.workerResources.
func (w *EnvironmentProfileWrapper) WorkerResources(r corev1.ResourceRequirements) *EnvironmentProfileWrapper {
	w.Spec.WorkerResources = &r
	return w
}

// RuntimeClass sets spec.runtimeClassName.
func (w *EnvironmentProfileWrapper) RuntimeClass(c string) *EnvironmentProfileWrapper {
	w.Spec.RuntimeClassName = c
	return w
}

// NodeSelector sets spec.nodeSelector.
func (w *EnvironmentProfileWrapper) NodeSelector(s map[string]string) *EnvironmentProfileWrapper {
	w.Spec.NodeSelector = s
	return w
}

// Tolerations sets spec.tolerations.
func (w *EnvironmentProfileWrapper) Tolerations(t ...corev1.Toleration) *EnvironmentProfileWrapper {
	w.Spec.Tolerations = t
	return w
}

// Match adds a selector expression, valid or not.
func (w *EnvironmentProfileWrapper) Match(e metav1.LabelSelectorRequirement) *EnvironmentProfileWrapper {
	w.Spec.NamespaceSelector.MatchExpressions = append(w.Spec.NamespaceSelector.MatchExpressions, e)
	return w
}

func with(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// The wrappers embed their object, so without these a *Wrapper would pass
// for a client.Object and fail only at run time ("no kind is registered
// for the type wrappers.ArtifactWrapper"). Shadowing DeepCopyObject with
// another signature makes that a compile error: call Obj().

// DeepCopyObject is not a runtime.Object's: call Obj().
func (w *ArtifactWrapper) DeepCopyObject(mustCallObj) {}

// DeepCopyObject is not a runtime.Object's: call Obj().
func (w *ClaimWrapper) DeepCopyObject(mustCallObj) {}

// DeepCopyObject is not a runtime.Object's: call Obj().
func (w *ClaimTemplateWrapper) DeepCopyObject(mustCallObj) {}

// DeepCopyObject is not a runtime.Object's: call Obj().
func (w *EnvironmentProfileWrapper) DeepCopyObject(mustCallObj) {}

type mustCallObj struct{}
