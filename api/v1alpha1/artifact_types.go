package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PackFormat is the OCI layout an Artifact is packed as.
// +kubebuilder:validation:Enum=ModelKit;ModelPack
type PackFormat string

const (
	// FormatModelKit is a KitOps ModelKit.
	FormatModelKit PackFormat = "ModelKit"
	// FormatModelPack is a CNCF ModelPack (model-spec).
	FormatModelPack PackFormat = "ModelPack"
)

// Compression is how an Artifact's tar layers are compressed. The values are
// those of `kit pack --compression`; each has its own layer media type
// (".tar", ".tar+gzip", ".tar+zstd") in both formats.
// +kubebuilder:validation:Enum=none;gzip;zstd
type Compression string

const (
	// CompressionNone stores plain tar layers, kit's default: weights barely
	// compress, and registries and runtimes can read them without inflating.
	CompressionNone Compression = "none"
	// CompressionGzip is gzip at its default level, as `kit pack --compression gzip`.
	CompressionGzip Compression = "gzip"
	// CompressionZstd is zstd at its default level.
	CompressionZstd Compression = "zstd"
)

// HuggingFaceSource imports a Hugging Face model repository.
type HuggingFaceSource struct {
	// repo is "<owner>/<name>", for example "Qwen/Qwen2.5-0.5B".
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$')",message="repo must be <owner>/<name>, for example Qwen/Qwen2.5-0.5B",reason=FieldValueForbidden
	Repo string `json:"repo"`

	// revision is a branch, tag or commit; it is resolved to the commit SHA
	// recorded in status.sourceRevision.
	// +optional
	// +kubebuilder:default=main
	// +kubebuilder:validation:MaxLength=255
	Revision string `json:"revision,omitempty"`

	// include lists glob patterns of files to download; empty means all.
	// Useful for repositories that hold many quantisations.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Include []string `json:"include,omitempty"`

	// exclude lists glob patterns of files to skip, applied after include.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Exclude []string `json:"exclude,omitempty"`

	// tokenSecretRef selects a Secret key holding a Hugging Face token. It
	// reaches the worker as the HF_TOKEN environment variable only.
	// +optional
	TokenSecretRef *corev1.SecretKeySelector `json:"tokenSecretRef,omitempty"`

	// endpoint overrides the Hugging Face endpoint (HF_ENDPOINT), for mirrors.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://')",message="endpoint must start with https:// or http://",reason=FieldValueForbidden
	Endpoint string `json:"endpoint,omitempty"`
}

// GitSource imports files from a Git repository.
type GitSource struct {
	// url of the repository (https://, http:// or ssh://).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^(https?|ssh)://')",message="url must start with https://, http:// or ssh://",reason=FieldValueForbidden
	URL string `json:"url"`

	// ref is a branch, a tag, a full ref name (refs/…) or a commit SHA (7 to
	// 40 hex digits); it is resolved to a commit. A full SHA is that commit;
	// otherwise a name the repository advertises wins, a branch before a tag.
	// +optional
	// +kubebuilder:default=main
	// +kubebuilder:validation:MaxLength=255
	Ref string `json:"ref,omitempty"`

	// path inside the repository to import; empty means the whole tree.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="path must be relative and must not contain '..'"
	Path string `json:"path,omitempty"`

	// secretRef names a Secret with "username"/"password", "token", or
	// "ssh-privatekey" (and optionally "known_hosts"). It is mounted into the
	// worker pod only.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// HTTPSource imports a single file or archive over HTTP(S).
type HTTPSource struct {
	// url of the file. Archives ending in .tar, .tar.gz, .tgz or .zip are extracted.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://')",message="url must start with https:// or http://",reason=FieldValueForbidden
	URL string `json:"url"`

	// sha256 is the expected hex digest of the download; a mismatch fails permanently.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256,omitempty"`
}

// OCISource copies or re-packs an existing OCI artifact.
type OCISource struct {
	// reference is "<repository>:<tag>" or "<repository>@sha256:<digest>".
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+([._-][a-z0-9]+)*(\\\\.[a-z0-9]+([._-][a-z0-9]+)*)*(:[0-9]{1,5})?(/[a-z0-9]+((\\\\.|_|__|-+)[a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|@sha256:[a-f0-9]{64})$')",message="reference must be <registry>/<repository>:<tag> or <registry>/<repository>@sha256:<digest>, in lower case, without credentials",reason=FieldValueForbidden
	Reference string `json:"reference"`

	// pullSecretRef names a kubernetes.io/dockerconfigjson Secret for the source registry.
	// +optional
	PullSecretRef *corev1.LocalObjectReference `json:"pullSecretRef,omitempty"`

	// plainHTTP talks to the source registry over plain HTTP.
	// +optional
	PlainHTTP bool `json:"plainHTTP,omitempty"`
}

// VolumeSource imports a path inside an existing PVC of the same namespace.
type VolumeSource struct {
	// claimName of the PVC; it is mounted read-only.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`

	// path inside the volume; empty means its root.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="path must be relative and must not contain '..'"
	Path string `json:"path,omitempty"`
}

// ArtifactSource says where the content comes from. Exactly one field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.huggingFace), has(self.git), has(self.http), has(self.oci), has(self.volume)].filter(x, x).size() == 1",message="exactly one of huggingFace, git, http, oci or volume must be set"
type ArtifactSource struct {
	// huggingFace imports a Hugging Face model repository.
	// +optional
	HuggingFace *HuggingFaceSource `json:"huggingFace,omitempty"`
	// git imports files from a Git repository.
	// +optional
	Git *GitSource `json:"git,omitempty"`
	// http imports a file or archive over HTTP(S).
	// +optional
	HTTP *HTTPSource `json:"http,omitempty"`
	// oci copies or re-packs an existing OCI artifact.
	// +optional
	OCI *OCISource `json:"oci,omitempty"`
	// volume imports a path inside an existing PVC.
	// +optional
	Volume *VolumeSource `json:"volume,omitempty"`
}

// ArtifactSpec is what to import, how to pack it and where to push it.
// +kubebuilder:validation:XValidation:rule="has(self.target.repository) && self.target.repository.size() > 0",message="target.repository is required",fieldPath=".target.repository"
// +kubebuilder:validation:XValidation:rule="has(self.workspace) == has(oldSelf.workspace)",message="workspace is immutable: it cannot be added or removed after creation",fieldPath=".workspace"
type ArtifactSpec struct {
	// source of the content. Exactly one kind of source is set.
	Source ArtifactSource `json:"source"`

	// format is the OCI layout: ModelKit (KitOps, the default) or ModelPack (CNCF model-spec).
	// +optional
	// +kubebuilder:default=ModelKit
	Format PackFormat `json:"format,omitempty"`

	// compression of the layers: none (the default, as kit), gzip or zstd.
	// zstd suits ModelPack; the kit CLI we checked unpacks none and gzip only.
	// +optional
	// +kubebuilder:default=none
	Compression Compression `json:"compression,omitempty"`

	// kitfile is an optional Kitfile (YAML). It is merged with the one
	// generated from the imported files: fields given here win.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Kitfile string `json:"kitfile,omitempty"`

	// target is where the artifact is pushed.
	Target Target `json:"target"`

	PipelineSpec `json:",inline"`
}

// Artifact imports a model or a set of files, packs it as an OCI artifact and
// pushes it; status.reference pins the result by digest.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=art;arts,categories=packline
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.status.digest`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.imageDigest`,priority=1
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.summary`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters so that derived object names and labels stay valid"
type Artifact struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired artifact.
	Spec ArtifactSpec `json:"spec"`
	// status is the observed state of the pipeline run.
	// +optional
	Status PipelineStatus `json:"status,omitempty"`
}

// ArtifactList is a list of Artifacts.
// +kubebuilder:object:root=true
type ArtifactList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Artifact `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Artifact{}, &ArtifactList{})
}
