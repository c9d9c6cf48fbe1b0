package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Target says where the packed artifact is pushed.
type Target struct {
	// repository is the OCI repository to push to, without tag or digest,
	// for example "registry.example.com/team/models/llama".
	// On a Claim it may be left empty to use the template's repository prefix.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+([._-][a-z0-9]+)*(\\\\.[a-z0-9]+([._-][a-z0-9]+)*)*(:[0-9]{1,5})?(/[a-z0-9]+((\\\\.|_|__|-+)[a-z0-9]+)*)+$')",message="repository must be <registry>/<path> in lower case, without tag, digest or credentials, for example registry.example.com/team/model",reason=FieldValueForbidden
	Repository string `json:"repository,omitempty"`

	// tag is the tag to push. The digest in status is the immutable reference;
	// the tag is a convenience for humans.
	// +optional
	// +kubebuilder:default=latest
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`
	Tag string `json:"tag,omitempty"`

	// pushSecretRef names a kubernetes.io/dockerconfigjson Secret in the same
	// namespace. It is mounted into the worker pod only; the controller never
	// reads it.
	// +optional
	PushSecretRef *corev1.LocalObjectReference `json:"pushSecretRef,omitempty"`

	// plainHTTP talks to the registry over plain HTTP instead of HTTPS.
	// +optional
	PlainHTTP bool `json:"plainHTTP,omitempty"`

	// insecureSkipTLSVerify disables TLS certificate verification. Prefer caSecretRef.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// caSecretRef names a Secret in the same namespace whose "ca.crt" key holds
	// PEM certificates to trust for the registry, in addition to the system pool.
	// +optional
	CASecretRef *corev1.LocalObjectReference `json:"caSecretRef,omitempty"`
}

// SigningSpec says how a pushed artifact is signed. The signature and an
// SLSA v1 provenance attestation are attached to the pushed digest in
// cosign's tag layout ("sha256-<hex>.sig" and ".att" in the same
// repository), so `cosign verify --key` and Flux's OCIRepository
// spec.verify check them.
// +kubebuilder:validation:XValidation:rule="has(self.keySecretRef.name) && self.keySecretRef.name.size() > 0",message="keySecretRef.name is required",fieldPath=".keySecretRef.name"
type SigningSpec struct {
	// keySecretRef names a Secret with the signing key in "cosign.key": an
	// ECDSA P-256 key, either in cosign's encrypted PEM format (what
	// `cosign generate-key-pair k8s://<namespace>/<name>` writes) or in
	// plain PKCS#8 PEM; and, for an encrypted key, its password in
	// "cosign.password". Only these two keys are mounted into the worker
	// pod; the controller never reads the Secret. On a Claim or Artifact it
	// is in the resource's namespace; on an EnvironmentProfile, in the
	// manager's template namespace.
	KeySecretRef corev1.LocalObjectReference `json:"keySecretRef"`
}

// ReclaimPolicy says what happens to the workspace PVC when a run ends.
// +kubebuilder:validation:Enum=Delete;Retain
type ReclaimPolicy string

const (
	// ReclaimDelete deletes the workspace PVC once the run succeeded, freeing
	// the storage. A failed run keeps it for inspection and resumable retries.
	ReclaimDelete ReclaimPolicy = "Delete"
	// ReclaimRetain keeps the workspace PVC until the resource is deleted.
	ReclaimRetain ReclaimPolicy = "Retain"
)

// WorkspaceSpec configures the workspace PVC <name>-workspace.
type WorkspaceSpec struct {
	// size of the workspace volume. Defaults to the profile's, else 10Gi.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="size must be positive"
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName of the workspace PVC. Defaults to the profile's, else
	// the cluster default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`

	// reclaimPolicy: Delete (the default) frees the workspace once the run
	// succeeded; Retain keeps it until the resource is deleted.
	// +optional
	// +kubebuilder:default=Delete
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// DeletionPolicy says what happens to the pushed tag when the resource is deleted.
// +kubebuilder:validation:Enum=Orphan;Delete
type DeletionPolicy string

const (
	// DeletionOrphan leaves the pushed artifact in the registry.
	DeletionOrphan DeletionPolicy = "Orphan"
	// DeletionDelete removes the pushed tag through a cleanup Job.
	DeletionDelete DeletionPolicy = "Delete"
)

// PipelineSpec holds the settings every pipeline run shares, on Artifact and Claim.
type PipelineSpec struct {
	// retryLimit is how many times a retryable failure is retried, with
	// exponential backoff, before the resource is Stalled. Defaults to the
	// manager's --default-retry-limit (3).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	RetryLimit *int32 `json:"retryLimit,omitempty"`

	// timeout bounds one attempt; it becomes the Job's activeDeadlineSeconds.
	// Between 1m and 168h; defaults to 6h.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="timeout must be a duration between 1m and 168h, such as 30m or 2h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// queueName is a Kueue LocalQueue. When set, the Job is created suspended
	// with the kueue.x-k8s.io/queue-name label and Kueue decides when it runs.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	QueueName string `json:"queueName,omitempty"`

	// workloadPriorityClassName is a Kueue WorkloadPriorityClass for a
	// queued run (with queueName): the Job carries it as the
	// kueue.x-k8s.io/priority-class label, and Kueue admits a run of a
	// higher priority first. Ignored without queueName.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	WorkloadPriorityClassName string `json:"workloadPriorityClassName,omitempty"`

	// workspace configures the workspace PVC. It is immutable: a bound
	// volume cannot change class or shrink.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workspace is immutable"
	Workspace *WorkspaceSpec `json:"workspace,omitempty"`

	// resources of the worker container, per resource name over the
	// EnvironmentProfile's workerResources and the manager's defaults. The
	// admission webhook refuses a request above its limit.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// deletionPolicy: Orphan (the default) leaves the pushed artifact in the
	// registry when this resource is deleted; Delete removes its tag.
	// +optional
	// +kubebuilder:default=Orphan
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// signing signs the pushed artifact with this key and attaches an SLSA
	// provenance attestation. The requester needs get on the Secret. A
	// Claim whose EnvironmentProfile sets signing is signed with the
	// profile's key instead, and may not set this.
	// +optional
	Signing *SigningSpec `json:"signing,omitempty"`

	// verifyInterval, when set, checks this often after a successful run
	// that the tag still resolves to status.digest and that the digest is
	// still in the registry, reporting TagMoved or ArtifactMissing in the
	// Verified condition. Each check is one small Job (two HEAD requests
	// with the push credentials; the manager itself holds none). At least
	// one minute.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1m')",message="verifyInterval must be a duration of at least 1m, such as 1h"
	VerifyInterval *metav1.Duration `json:"verifyInterval,omitempty"`
}

// Phase is the coarse state of a pipeline run.
// +kubebuilder:validation:Enum=Pending;Queued;Running;Retrying;Succeeded;Failed
type Phase string

const (
	PhasePending   Phase = "Pending"
	PhaseQueued    Phase = "Queued"
	PhaseRunning   Phase = "Running"
	PhaseRetrying  Phase = "Retrying"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
)

// kstatus condition types.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionSigned is True once the pushed digest carries its signature
	// and provenance, False when signing failed; absent when the run signs
	// nothing.
	ConditionSigned = "Signed"
)

// PipelineStatus is the observed state of a pipeline run, the same on Artifact and Claim.
type PipelineStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is Pending, Queued, Running, Retrying, Succeeded or Failed.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// digest of the pushed manifest, "sha256:...".
	// +optional
	Digest string `json:"digest,omitempty"`

	// reference pins the pushed artifact by digest: "<repository>@sha256:...".
	// +optional
	Reference string `json:"reference,omitempty"`

	// imageDigest is the digest of the OCI image view of digest: an image
	// manifest over the same layers (tag "sha256-<hex>.image" in the same
	// repository), which container runtimes mount as an image volume. kit
	// and ModelPack clients read reference; containerd mounts only this.
	// +optional
	ImageDigest string `json:"imageDigest,omitempty"`

	// imageReference pins the image view by digest:
	// "<repository>@sha256:...". A Claim binding this Artifact renders it
	// (for volumes[].image).
	// +optional
	ImageReference string `json:"imageReference,omitempty"`

	// pushSeal is the manager's MAC over the object's UID, digest and
	// reference, written when the manager itself read the push from its
	// worker. A new run hands the worker reference (whose layers it then
	// re-uses) only when the seal verifies: anyone with the status
	// subresource can write reference, not a seal.
	// +optional
	PushSeal string `json:"pushSeal,omitempty"`

	// tag that was pushed.
	// +optional
	Tag string `json:"tag,omitempty"`

	// signature is the digest of the cosign signature manifest attached to
	// digest (tag "sha256-<hex>.sig" in the same repository).
	// +optional
	Signature string `json:"signature,omitempty"`

	// attestation is the digest of the SLSA provenance attestation manifest
	// attached to digest (tag "sha256-<hex>.att").
	// +optional
	Attestation string `json:"attestation,omitempty"`

	// attempts made for the observed generation.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// jobRef names the Job of the current attempt.
	// +optional
	JobRef *corev1.LocalObjectReference `json:"jobRef,omitempty"`

	// startTime is when the first attempt of this generation started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the run reached Succeeded or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// nextAttemptTime is when a Retrying run starts its next attempt. It is
	// kept in status so that a restarted manager honours the backoff.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`

	// sourceRevision is the resolved source: a Git commit, a Hugging Face
	// commit or a source digest.
	// +optional
	SourceRevision string `json:"sourceRevision,omitempty"`

	// inputsHash is a hash of the effective inputs of the run (spec, and for a
	// Claim its template, profile and values). A change starts a new run.
	// +optional
	InputsHash string `json:"inputsHash,omitempty"`

	// lastHandledRequestedAt is the last packline.dev/requestedAt value the
	// controller acted on.
	// +optional
	LastHandledRequestedAt string `json:"lastHandledRequestedAt,omitempty"`

	// lastVerifiedTime is when the last periodic verification
	// (spec.verifyInterval) of the pushed digest finished; verifications
	// counts them for the current run.
	// +optional
	LastVerifiedTime *metav1.Time `json:"lastVerifiedTime,omitempty"`
	// +optional
	Verifications int32 `json:"verifications,omitempty"`

	// progress is what a Running run is doing, as its worker last reported
	// it (an Artifact's bytes downloaded, a Claim's step), and a pushed
	// Claim waiting for delivery. It is unset otherwise.
	// +optional
	Progress *RunProgress `json:"progress,omitempty"`

	// conditions: Ready, Reconciling and Stalled, in kstatus style.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProgressStep is what a run is doing.
// +kubebuilder:validation:Enum=download;push;clone;render;deliver
type ProgressStep string

// Steps: an Artifact downloads, then packs and pushes; a Claim clones its
// template, renders, pushes and is delivered.
const (
	StepDownload ProgressStep = "download"
	StepPush     ProgressStep = "push"
	StepClone    ProgressStep = "clone"
	StepRender   ProgressStep = "render"
	StepDeliver  ProgressStep = "deliver"
)

// RunProgress is the progress of a running worker. The manager reads it
// from the last progress line of the worker's log (the worker has no API
// token to write it), at most once per --progress-interval per object; the
// numbers are the worker's, bounded, and nothing else of the log is
// copied (see docs/concepts.md, "Progress").
type RunProgress struct {
	// step is download or push (an Artifact); clone, render, push or
	// deliver (a Claim).
	Step ProgressStep `json:"step"`

	// bytesDone is how many bytes the step has moved.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BytesDone int64 `json:"bytesDone,omitempty"`

	// bytesTotal is how many bytes the step moves in all; 0 when unknown.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BytesTotal int64 `json:"bytesTotal,omitempty"`

	// bytesPerSecond is the step's mean rate since it started.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`

	// observedAt is when the manager first read these values. Values that
	// did not change are not written again: an old observedAt on a Running
	// run means that no byte moved since.
	ObservedAt metav1.Time `json:"observedAt"`

	// summary is the same for people and the Progress column:
	// "12.3 GiB/100 GiB (45.0 MiB/s)", or the step alone.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Summary string `json:"summary,omitempty"`
}
