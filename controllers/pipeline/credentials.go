package pipeline

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// Mounts collects the env vars and volumes that carry credentials into the
// worker pod. They only ever reference Secrets by name: the manager has no
// RBAC on Secrets and never sees their content.
type Mounts struct {
	Env     []corev1.EnvVar
	Volumes []corev1.Volume
	Mounts  []corev1.VolumeMount
	// Sources name, by volume, the object a volume mounts and the field
	// that names it (`Secret "push" (spec.target.pushSecretRef)`): the
	// kubelet's FailedMount message names only the volume and the object.
	Sources map[string]string
}

// Source records what volume mounts, for messages (see Sources).
func (m *Mounts) Source(volume, ref string) {
	if m.Sources == nil {
		m.Sources = map[string]string{}
	}
	m.Sources[volume] = ref
}

// The volumes of a push target: a Job that only talks to the target's
// registry (resolve, cleanup) needs these and no other.
const (
	VolumePushAuth   = "push-auth"
	VolumeRegistryCA = "registry-ca"
)

// SecretDir mounts a Secret's items read-only at dir (always name items:
// a Secret is never mounted whole).
func (m *Mounts) SecretDir(volume, secret, dir string, items ...corev1.KeyToPath) {
	m.Volumes = append(m.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, Items: items, DefaultMode: ptrMode(0o440)},
	}})
	m.Mounts = append(m.Mounts, corev1.VolumeMount{Name: volume, MountPath: dir, ReadOnly: true})
}

// GitCredentialKeys are the Secret keys a Git credential may use.
var GitCredentialKeys = []string{"username", "password", "token", "ssh-privatekey", "known_hosts"}

// SecretKeys mounts only the named keys of a Secret, read-only, at dir:
// never its other keys, which the worker has no use for and a tenant's
// content must not reach. The keys are optional because a credential uses
// only some of them (a token, or a username and password, or an SSH key);
// a Secret with none of them mounts as an empty folder, and the source
// then fails with a hint that names the Secret.
func (m *Mounts) SecretKeys(volume, secret, dir string, keys ...string) {
	items := make([]corev1.KeyToPath, 0, len(keys))
	for _, k := range keys {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	m.SecretDir(volume, secret, dir, items...)
	m.Volumes[len(m.Volumes)-1].Secret.Optional = ptr.To(true)
}

// SecretEnv sets name from a Secret key.
func (m *Mounts) SecretEnv(name string, sel corev1.SecretKeySelector) {
	m.Env = append(m.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &sel}})
}

// Target mounts a push target's docker config and CA, and returns the
// secret-free target for the worker document.
func (m *Mounts) Target(t v1alpha1.Target, repository string) workerv1.Target {
	out := workerv1.Target{Repository: repository, Tag: t.Tag, PlainHTTP: t.PlainHTTP, Insecure: t.InsecureSkipTLSVerify}
	if out.Tag == "" {
		out.Tag = "latest"
	}
	if t.PushSecretRef != nil {
		m.dockerConfig(VolumePushAuth, t.PushSecretRef.Name, workerv1.PushAuthDir)
		m.Source(VolumePushAuth, fmt.Sprintf("Secret %q (spec.target.pushSecretRef, key %s)", t.PushSecretRef.Name, corev1.DockerConfigJsonKey))
		m.Env = append(m.Env, corev1.EnvVar{Name: workerv1.EnvDockerConfig, Value: workerv1.PushAuthDir})
	}
	if t.CASecretRef != nil {
		m.SecretDir(VolumeRegistryCA, t.CASecretRef.Name, workerv1.CADir, corev1.KeyToPath{Key: "ca.crt", Path: "ca.crt"})
		m.Source(VolumeRegistryCA, fmt.Sprintf("Secret %q (spec.target.caSecretRef, key ca.crt)", t.CASecretRef.Name))
		out.CAFile = path.Join(workerv1.CADir, "ca.crt")
	}
	return out
}

// TargetOnly is the part of m that Target added: the push target's docker
// config (with DOCKER_CONFIG) and CA. A Job that only reads or deletes what
// the run pushed needs nothing else of the run's mounts.
func (m Mounts) TargetOnly() Mounts {
	var out Mounts
	keep := map[string]bool{VolumePushAuth: true, VolumeRegistryCA: true}
	for _, v := range m.Volumes {
		if keep[v.Name] {
			out.Volumes = append(out.Volumes, v)
		}
	}
	for _, vm := range m.Mounts {
		if keep[vm.Name] {
			out.Mounts = append(out.Mounts, vm)
		}
	}
	for _, e := range m.Env {
		if e.Name == workerv1.EnvDockerConfig && e.Value == workerv1.PushAuthDir {
			out.Env = append(out.Env, e)
		}
	}
	for vol, ref := range m.Sources {
		if keep[vol] {
			out.Source(vol, ref)
		}
	}
	return out
}

// SigningKey mounts only the key and password of a signing key Secret
// (the names `cosign generate-key-pair k8s://…` writes). Optional, like
// SecretKeys: a missing Secret or key reaches the worker as a missing
// file, which it reports as SigningKeyMissing naming the field, rather
// than a pod that cannot start.
func (m *Mounts) SigningKey(secret string) {
	m.SecretKeys("signing-key", secret, workerv1.SigningKeyDir, workerv1.SigningKeyFile, workerv1.SigningPasswordFile)
}

// PullSecret mounts a dockerconfigjson Secret for a source registry.
func (m *Mounts) PullSecret(secret string) {
	m.dockerConfig("pull-auth", secret, workerv1.PullAuthDir)
	m.Source("pull-auth", fmt.Sprintf("Secret %q (spec.source.oci.pullSecretRef, key %s)", secret, corev1.DockerConfigJsonKey))
}

// dockerConfig maps the Secret's .dockerconfigjson key to config.json, the
// file name DOCKER_CONFIG readers expect.
func (m *Mounts) dockerConfig(volume, secret, dir string) {
	m.SecretDir(volume, secret, dir, corev1.KeyToPath{Key: corev1.DockerConfigJsonKey, Path: "config.json"})
}

func ptrMode(m int32) *int32 { return &m }
