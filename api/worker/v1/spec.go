// The spec is what the controller hands the worker: a JSON document in
// the PACKLINE_SPEC environment variable, plus the fixed paths and variable
// names where the pod carries credentials.
//
// The document holds no secret. Credentials reach the pod only as
// env.valueFrom or Secret volumes at the paths below, so they never appear in
// args, the Job spec, logs or the controller's memory.

package workerv1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// Environment variables and paths shared by the Job builder and the worker.
const (
	// EnvSpec holds the JSON-encoded Artifact or Claim document.
	EnvSpec = "PACKLINE_SPEC"
	// EnvHFToken carries the Hugging Face token (env.valueFrom a Secret key).
	EnvHFToken = "HF_TOKEN"
	// EnvHFEndpoint overrides the Hugging Face endpoint.
	EnvHFEndpoint = "HF_ENDPOINT"
	// EnvArchiveMaxBytes bounds what an HTTP archive may expand to; the
	// controller sets it to the workspace size, where extraction writes.
	EnvArchiveMaxBytes = "PACKLINE_ARCHIVE_MAX_BYTES"
	// EnvDockerConfig points at the folder holding the push config.json.
	EnvDockerConfig = "DOCKER_CONFIG"

	// WorkspaceDir is where the workspace PVC is mounted.
	WorkspaceDir = "/workspace"
	// TmpDir is a writable emptyDir; the root filesystem is read-only.
	TmpDir = "/tmp"
	// PushAuthDir holds config.json from the target's dockerconfigjson Secret.
	PushAuthDir = "/var/run/packline/push-auth"
	// PullAuthDir holds config.json for an OCI source's registry.
	PullAuthDir = "/var/run/packline/pull-auth"
	// CADir holds ca.crt from the target's CA Secret.
	CADir = "/var/run/packline/ca"
	// SourceAuthDir holds the Git source Secret's keys as files
	// (username, password, token, ssh-privatekey, known_hosts).
	SourceAuthDir = "/var/run/packline/source-auth"
	// TemplateAuthDir holds a private ClaimTemplate's repository Secret's
	// credential keys as files (same keys as SourceAuthDir). It is mounted
	// only into render pods in the template namespace.
	TemplateAuthDir = "/var/run/packline/template-auth"
	// SourceVolumeDir is where a volume source's PVC is mounted read-only.
	SourceVolumeDir = "/var/run/packline/source-volume"
	// SigningKeyDir holds SigningKeyFile and SigningPasswordFile from the
	// signing key Secret (only those two keys).
	SigningKeyDir = "/var/run/packline/signing-key"
	// SigningKeyFile and SigningPasswordFile are the Secret's keys, as
	// `cosign generate-key-pair k8s://…` names them.
	SigningKeyFile      = "cosign.key"
	SigningPasswordFile = "cosign.password"

	// EnvWorkerImage is the worker image the Job names (the manager's
	// --worker-image), recorded in the provenance.
	EnvWorkerImage = "PACKLINE_WORKER_IMAGE"
	// EnvInvocation is "<namespace>/<job>", the provenance's invocation ID.
	EnvInvocation = "PACKLINE_INVOCATION"
	// EnvPushedDigest and EnvPushedRevision are set when an earlier
	// attempt of the same run pushed the artifact and then failed to sign
	// it: the worker then only signs that digest, without pushing again.
	EnvPushedDigest   = "PACKLINE_PUSHED_DIGEST"
	EnvPushedRevision = "PACKLINE_PUSHED_REVISION"
)

// Signing asks the worker to sign what it pushed with the key mounted at
// SigningKeyDir, and says what to record in the provenance.
type Signing struct {
	// KeyField names where the key comes from, for messages: the spec
	// field and Secret name, never the content.
	KeyField string `json:"keyField"`
	// Resource is the Artifact or Claim the run is for.
	Resource Resource `json:"resource"`
	// Template and Profile are a Claim's ClaimTemplate and
	// EnvironmentProfile names.
	Template string `json:"template,omitempty"`
	Profile  string `json:"profile,omitempty"`
}

// Resource names a Kubernetes object at one generation.
type Resource struct {
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	Generation int64  `json:"generation"`
}

// Target is where the worker pushes. Credentials come from DOCKER_CONFIG.
type Target struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	PlainHTTP  bool   `json:"plainHTTP,omitempty"`
	Insecure   bool   `json:"insecure,omitempty"`
	// CAFile is set when a CA Secret is mounted.
	CAFile string `json:"caFile,omitempty"`
}

// Artifact is the job of `worker artifact`.
type Artifact struct {
	Source v1alpha1.ArtifactSource `json:"source"`
	Format v1alpha1.PackFormat     `json:"format"`
	// Compression of the layers; empty is none.
	Compression v1alpha1.Compression `json:"compression,omitempty"`
	Kitfile     string               `json:"kitfile,omitempty"`
	Target      Target               `json:"target"`
	// Annotations are added to the pushed manifest.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Signing, when set, signs the pushed manifest.
	Signing *Signing `json:"signing,omitempty"`
	// Previous are references ("repo@sha256:…") of earlier pushes whose
	// layers this run may reuse: the resource's status.reference from its
	// last success, and possibly other resources' of the same source.
	// The manifest the target tag points at is always looked at; these
	// add a pushed manifest whose tag moved on, or one in another
	// repository of the same registry (its layers are mounted, not sent).
	// References on another registry are ignored.
	Previous []string `json:"previous,omitempty"`
}

// Claim is the job of `worker claim`: render the template with the values,
// exposure and profile, and push the manifests.
type Claim struct {
	// Name and Namespace of the Claim, used for the default names of
	// generated objects and the rendered namespace.
	Name      string                           `json:"name"`
	Namespace string                           `json:"namespace"`
	Template  v1alpha1.ClaimTemplateSpec       `json:"template"`
	Values    *apiextensionsv1.JSON            `json:"values,omitempty"`
	Exposure  v1alpha1.Exposure                `json:"exposure"`
	Profile   *v1alpha1.EnvironmentProfileSpec `json:"profile,omitempty"`
	Target    Target                           `json:"target"`
	// Check renders and pushes nothing: a ClaimTemplate's check run, which
	// reports the commit and the kinds the template renders.
	Check bool `json:"check,omitempty"`
	// Signing, when set, signs the pushed manifest.
	Signing *Signing `json:"signing,omitempty"`
	// InitPull says how to reach the registries of the Artifacts bound
	// with mount InitPull.
	InitPull *InitPull `json:"initPull,omitempty"`
}

// InitPull is what the render needs, beyond the bindings, to write the
// init container of an Artifact binding with mount InitPull: the
// registry settings of each bound Artifact's own target, by value name.
type InitPull struct {
	// Image is the worker image the init container runs: the manager's
	// --worker-image, the render Job's own.
	Image string `json:"image"`
	// PlainHTTP and Insecure name the values whose Artifact's target has
	// plainHTTP or insecureSkipTLSVerify.
	PlainHTTP []string `json:"plainHTTP,omitempty"`
	Insecure  []string `json:"insecure,omitempty"`
}

// EncodeSpec returns the JSON document for EnvSpec.
func EncodeSpec(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// LoadSpec decodes EnvSpec into v, rejecting unknown fields so that a worker
// older than the controller fails loudly instead of ignoring a setting.
func LoadSpec(v any) error {
	raw := os.Getenv(EnvSpec)
	if raw == "" {
		return errors.New(EnvSpec + " is not set")
	}
	return DecodeSpec([]byte(raw), v)
}

// DecodeSpec is LoadSpec on bytes.
func DecodeSpec(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", EnvSpec, err)
	}
	return nil
}

// Resolve is the document of `worker resolve`: what does the target tag
// name now? It reads back the result of a run that pushed on another
// cluster, whose pod's termination message never reaches this one.
type Resolve struct {
	Target Target `json:"target"`
}

// Verify is the document of `worker verify`: does the tag still resolve
// to the pushed digest, and is the digest still there?
type Verify struct {
	// Reference is "<repository>@sha256:…" from the resource's status.
	Reference string `json:"reference"`
	// Target carries the push credentials and the tag that should still
	// point at Reference's digest.
	Target Target `json:"target"`
}

// Delete is the job of `worker delete`, run for deletionPolicy Delete: it
// removes the pushed manifest, but only while Tag still points at it, so a
// newer push to the same tag by someone else is never removed.
type Delete struct {
	// Reference is "<repository>@sha256:…" from the resource's status.
	Reference string `json:"reference"`
	Target    Target `json:"target"`
}
