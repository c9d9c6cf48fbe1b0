package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExposureType is how a claimed workload is reached.
// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer;Ingress
type ExposureType string

const (
	ExposureClusterIP    ExposureType = "ClusterIP"
	ExposureNodePort     ExposureType = "NodePort"
	ExposureLoadBalancer ExposureType = "LoadBalancer"
	ExposureIngress      ExposureType = "Ingress"
)

// TemplateSource is a Kustomize target in Git.
type TemplateSource struct {
	// url of the Git repository (https://, http:// or ssh://). It must not
	// carry credentials: a URL is copied into Jobs and status, so a private
	// repository's credentials go in secretRef instead.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh)://')",message="url must start with https://, http:// or ssh://",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!self.matches('^https?://[^/?#]*@')",message="url must not embed credentials (user:password@ or token@): put them in a Secret and name it in spec.source.secretRef",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!self.matches('^ssh://[^/@]*:[^/@]*@')",message="url must not embed a password: put an ssh-privatekey and known_hosts in a Secret and name it in spec.source.secretRef",reason=FieldValueForbidden
	URL string `json:"url"`

	// secretRef names a Secret in the manager's template namespace (the
	// --template-namespace flag, by default the manager's own namespace)
	// with the repository's credentials: "token", or "username" and
	// "password", or "ssh-privatekey" and "known_hosts". Tenants never see
	// it: Claims of a template with credentials render in the template
	// namespace, not in the Claim's, and push with spec.pushSecretRef.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`

	// ref is a branch, a tag, a full ref name (refs/…) or a commit SHA (7 to
	// 40 hex digits), resolved as an Artifact's Git ref is; the resolved
	// commit is recorded on each Claim.
	// +optional
	// +kubebuilder:default=main
	// +kubebuilder:validation:MaxLength=255
	Ref string `json:"ref,omitempty"`

	// path of the Kustomize base inside the repository, for example "apps/code-server/base".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="path must be relative and must not contain '..'"
	Path string `json:"path"`
}

// ExposureOption is one exposure type the template offers.
type ExposureOption struct {
	// type of exposure.
	Type ExposureType `json:"type"`

	// component is an optional Kustomize component path (relative to the
	// repository root) applied for this exposure, for example
	// "apps/code-server/components/ingress".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Component string `json:"component,omitempty"`
}

// BindingKind says how a value is written into a rendered object.
// +kubebuilder:validation:Enum=Replicas;Image;Resources;Env;Field;Artifact
type BindingKind string

const (
	BindingReplicas  BindingKind = "Replicas"
	BindingImage     BindingKind = "Image"
	BindingResources BindingKind = "Resources"
	BindingEnv       BindingKind = "Env"
	BindingField     BindingKind = "Field"
	// BindingArtifact takes the name of an Artifact in the Claim's namespace
	// and writes its digest-pinned reference (repository@sha256:...) into
	// fieldPath (for example an image volume's reference, the way model-spec
	// means models to be mounted, or an init container's image), or into
	// the env var envName. The Claim waits until the Artifact is Ready and
	// renders again when its digest changes; the requester must be allowed
	// to get the Artifact.
	BindingArtifact BindingKind = "Artifact"
)

// ObjectSelector picks rendered objects by kind and name.
type ObjectSelector struct {
	// kind of the rendered object, for example "Deployment".
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// name of the rendered object.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ParameterBinding moves one user value into a field of a rendered object.
// +kubebuilder:validation:XValidation:rule="self.kind != 'Field' || (has(self.fieldPath) && self.fieldPath.size() > 0)",message="fieldPath is required when kind is Field",fieldPath=".fieldPath"
// +kubebuilder:validation:XValidation:rule="self.kind != 'Env' || (has(self.envName) && self.envName.size() > 0)",message="envName is required when kind is Env",fieldPath=".envName"
// +kubebuilder:validation:XValidation:rule="self.kind != 'Artifact' || (has(self.fieldPath) && self.fieldPath.size() > 0) != (has(self.envName) && self.envName.size() > 0)",message="an Artifact binding needs exactly one of fieldPath and envName"
// +kubebuilder:validation:XValidation:rule="!has(self.mount) || self.mount != 'InitPull' || self.kind == 'Artifact'",message="mount InitPull is for Artifact bindings",fieldPath=".mount"
type ParameterBinding struct {
	// value is the top-level key in the Claim's values.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Value string `json:"value"`

	// kind of binding: Replicas, Image, Resources, Env or Field.
	Kind BindingKind `json:"kind"`

	// target is the rendered object that receives the value.
	Target ObjectSelector `json:"target"`

	// container is the container name for Image, Resources and Env; the first container when empty.
	// +optional
	Container string `json:"container,omitempty"`

	// envName is the environment variable set by an Env binding.
	// +optional
	EnvName string `json:"envName,omitempty"`

	// fieldPath is a JSON pointer (RFC 6901) for a Field binding, for example "/spec/template/spec/priorityClassName".
	// +optional
	// +kubebuilder:validation:Pattern=`^(/([^/~]|~[01])+)+$`
	FieldPath string `json:"fieldPath,omitempty"`

	// artifactView is what an Artifact binding renders. Image (the
	// default) is the Artifact's status.imageReference: the OCI image view
	// of the model, which containerd mounts in volumes[].image (it mounts
	// a ModelKit or ModelPack as an empty folder). Artifact is its
	// status.reference, the ModelKit or ModelPack that kit and ModelPack
	// clients read (for example an init container's `kit unpack`). An
	// Artifact pushed before image views existed has none: Image then
	// renders status.reference until its next run.
	// +optional
	// +kubebuilder:validation:Enum=Image;Artifact
	ArtifactView ArtifactView `json:"artifactView,omitempty"`

	// mount is how an Artifact binding whose fieldPath is an image
	// volume's reference (<pod spec>/volumes/<index>/image/reference)
	// reaches the workload. ImageVolume (the default) keeps the image
	// volume: the node pulls and mounts it, which needs Kubernetes 1.33 or
	// later with the ImageVolume feature and containerd 2.1 or later (or
	// CRI-O). InitPull, for runtimes without image volumes, renders an
	// emptyDir of the same name instead, filled before the workload
	// starts by an init container that runs the worker image's `worker
	// pull`: every blob verified against its digest, file modes kept, as
	// a non-root user with a read-only root and no capabilities. It pulls
	// with the pod's first imagePullSecret, if any.
	// +optional
	// +kubebuilder:validation:Enum=ImageVolume;InitPull
	Mount ArtifactMount `json:"mount,omitempty"`
}

// ArtifactMount is how an Artifact bound into an image volume reaches the
// workload.
type ArtifactMount string

const (
	ArtifactMountImageVolume ArtifactMount = "ImageVolume"
	ArtifactMountInitPull    ArtifactMount = "InitPull"
)

// ArtifactView is which manifest of an Artifact a binding renders.
type ArtifactView string

const (
	ArtifactViewImage    ArtifactView = "Image"
	ArtifactViewArtifact ArtifactView = "Artifact"
)

// GeneratorKind is the kind of generated object.
// +kubebuilder:validation:Enum=ConfigMap;Secret
type GeneratorKind string

// Generator turns user values into a generated ConfigMap or Secret.
//
// Values are not confidential: they are stored in the Claim, passed to the
// render Job, and written into the pushed artifact. A Secret generator suits
// non-sensitive settings that a workload expects as a Secret; real
// credentials belong in a Secret the workload references (for example one
// managed by External Secrets or SOPS), never in values.
type Generator struct {
	// kind is ConfigMap or Secret.
	Kind GeneratorKind `json:"kind"`
	// name of the generated object (Kustomize appends a content hash).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Name string `json:"name"`
	// values are the top-level keys in the Claim's values that become entries.
	// +kubebuilder:validation:MinItems=1
	Values []string `json:"values"`
}

// Access says who may claim a template. Every rule must hold.
type Access struct {
	// namespaceSelector limits claims to namespaces with matching labels; empty allows every namespace.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn'] && has(e.values) && size(e.values) > 0) || (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="matchExpressions: operator must be In or NotIn with values, or Exists or DoesNotExist without values"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// groups limits claims to users in one of these groups. The admission
	// webhook records who asked; without it such a template cannot be
	// claimed (the Claim stalls with EntitlementUnverified).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Groups []string `json:"groups,omitempty"`

	// requireClaimVerb (default true) requires the requester to hold the
	// RBAC verb "claim" on this ClaimTemplate (resource "claimtemplates" in
	// group packline.dev, resourceName the template's name), granted with a
	// ClusterRole and a RoleBinding in the tenant's namespace. Set false to
	// let anyone who may create Claims in a selected namespace claim it.
	// +optional
	// +kubebuilder:default=true
	RequireClaimVerb *bool `json:"requireClaimVerb,omitempty"`
}

// ClaimVerbRequired reports whether claiming needs the RBAC verb "claim".
func (a Access) ClaimVerbRequired() bool { return a.RequireClaimVerb == nil || *a.RequireClaimVerb }

// RenderedKind is a kind of object a template may render.
type RenderedKind struct {
	// group is the API group; empty for the core group (Service, ConfigMap, Secret).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind, for example "Deployment".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
}

// String is "Kind.group", or "Kind" for the core group.
func (k RenderedKind) String() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Kind + "." + k.Group
}

// ClaimTemplateSpec is a workload template published by a platform admin.
type ClaimTemplateSpec struct {
	// source is the Kustomize base in Git.
	Source TemplateSource `json:"source"`

	// kinds are every kind this template may render, generated ConfigMaps
	// and Secrets included. The admission webhook requires the requester to
	// be allowed to create each of them in the Claim's namespace (the GitOps
	// tool that applies the output usually holds more rights than the
	// tenant), and a render whose output holds any other kind fails with
	// reason UndeclaredKind.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Kinds []RenderedKind `json:"kinds"`

	// components are Kustomize component paths (relative to the repository root) always applied.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Components []string `json:"components,omitempty"`

	// valuesSchema is a JSON schema (draft 2020-12) that a Claim's values must satisfy.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	ValuesSchema *apiextensionsv1.JSON `json:"valuesSchema,omitempty"`

	// parameters bind values to fields of the rendered objects.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Parameters []ParameterBinding `json:"parameters,omitempty"`

	// generators turn values into a generated ConfigMap or Secret.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Generators []Generator `json:"generators,omitempty"`

	// service is the name of the rendered Service that exposure applies to.
	// +optional
	Service string `json:"service,omitempty"`

	// exposures lists the exposure types on offer; empty offers ClusterIP only.
	// +optional
	// +listType=map
	// +listMapKey=type
	Exposures []ExposureOption `json:"exposures,omitempty"`

	// access says who may claim this template.
	// +optional
	Access Access `json:"access,omitempty"`

	// repositoryPrefix is the default target: a Claim without target.repository
	// pushes to "<repositoryPrefix>/<namespace>/<claim name>".
	// +optional
	// +kubebuilder:validation:MaxLength=200
	RepositoryPrefix string `json:"repositoryPrefix,omitempty"`

	// pushSecretRef names a dockerconfigjson Secret in the template
	// namespace for pushing the renders of a template with
	// spec.source.secretRef. Such Claims always push to
	// "<repositoryPrefix>/<namespace>/<name>": they may set only the tag
	// of spec.target.
	// +optional
	PushSecretRef *corev1.LocalObjectReference `json:"pushSecretRef,omitempty"`

	// pushPlainHTTP pushes with pushSecretRef over plain HTTP. It applies
	// to the Claims that render in the template namespace (a private
	// template's, and those an EnvironmentProfile signs): the platform's
	// credential travels as the platform says. Such a Claim may not set
	// spec.target.plainHTTP unless this is set too.
	// +optional
	PushPlainHTTP bool `json:"pushPlainHTTP,omitempty"`

	// pushInsecureSkipTLSVerify skips TLS verification of the registry
	// for the same pushes; such a Claim may not set
	// spec.target.insecureSkipTLSVerify unless this is set too.
	// +optional
	PushInsecureSkipTLSVerify bool `json:"pushInsecureSkipTLSVerify,omitempty"`
}

// Private reports whether the template's repository needs credentials, so
// its Claims render in the template namespace.
func (t *ClaimTemplateSpec) Private() bool { return t.Source.SecretRef != nil }

// ClaimTemplateStatus is the observed state of a ClaimTemplate.
type ClaimTemplateStatus struct {
	// observedGeneration is the generation last validated.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready says whether the template is usable (for example, its values schema compiles).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// check is the last check render of the template: the same render a
	// Claim runs, with the values schema's defaults (or first examples), the
	// first exposure on offer and no profile, pushing nothing.
	// +optional
	Check *TemplateCheck `json:"check,omitempty"`
}

// TemplateCheck is the outcome of a template's check render.
type TemplateCheck struct {
	// observedGeneration is the template generation the check rendered.
	ObservedGeneration int64 `json:"observedGeneration"`
	// inputsHash identifies the template spec and re-run request checked.
	// +optional
	InputsHash string `json:"inputsHash,omitempty"`
	// resolvedCommit is the Git commit spec.source.ref resolved to.
	// +optional
	ResolvedCommit string `json:"resolvedCommit,omitempty"`
	// kinds the template rendered, as Kind or Kind.group.
	// +optional
	// +listType=set
	Kinds []string `json:"kinds,omitempty"`
	// jobRef names the check Job, in the manager's template namespace.
	// +optional
	JobRef string `json:"jobRef,omitempty"`
	// completionTime is when the check finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// ClaimTemplate is an admin-published workload template: a Kustomize target in
// Git, a values schema, parameter bindings and the exposures on offer.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ctpl,categories=packline
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.source.url`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.spec.source.path`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.check.resolvedCommit`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClaimTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template.
	Spec ClaimTemplateSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status ClaimTemplateStatus `json:"status,omitempty"`
}

// ClaimTemplateList is a list of ClaimTemplates.
// +kubebuilder:object:root=true
type ClaimTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClaimTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClaimTemplate{}, &ClaimTemplateList{})
}
