package pipeline

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/spec"
)

// Mounts collects the env vars and volumes that carry credentials into the
// worker pod. They only ever reference Secrets by name: the manager has no
// RBAC on Secrets and never sees their content.
type Mounts struct {
	Env     []corev1.EnvVar
	Volumes []corev1.Volume
	Mounts  []corev1.VolumeMount
}

// SecretDir mounts a whole Secret read-only at dir.
func (m *Mounts) SecretDir(volume, secret, dir string, items ...corev1.KeyToPath) {
	m.Volumes = append(m.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, Items: items, DefaultMode: ptrMode(0o440)},
	}})
	m.Mounts = append(m.Mounts, corev1.VolumeMount{Name: volume, MountPath: dir, ReadOnly: true})
}

// SecretEnv sets name from a Secret key.
func (m *Mounts) SecretEnv(name string, sel corev1.SecretKeySelector) {
	m.Env = append(m.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &sel}})
}

// Target mounts a push target's docker config and CA, and returns the
// secret-free target for the worker document.
func (m *Mounts) Target(t v1alpha1.Target, repository string) spec.Target {
	out := spec.Target{Repository: repository, Tag: t.Tag, PlainHTTP: t.PlainHTTP, Insecure: t.InsecureSkipTLSVerify}
	if out.Tag == "" {
		out.Tag = "latest"
	}
	if t.PushSecretRef != nil {
		m.dockerConfig("push-auth", t.PushSecretRef.Name, spec.PushAuthDir)
		m.Env = append(m.Env, corev1.EnvVar{Name: spec.EnvDockerConfig, Value: spec.PushAuthDir})
	}
	if t.CASecretRef != nil {
		m.SecretDir("registry-ca", t.CASecretRef.Name, spec.CADir, corev1.KeyToPath{Key: "ca.crt", Path: "ca.crt"})
		out.CAFile = path.Join(spec.CADir, "ca.crt")
	}
	return out
}

// PullSecret mounts a dockerconfigjson Secret for a source registry.
func (m *Mounts) PullSecret(secret string) {
	m.dockerConfig("pull-auth", secret, spec.PullAuthDir)
}

// dockerConfig maps the Secret's .dockerconfigjson key to config.json, the
// file name DOCKER_CONFIG readers expect.
func (m *Mounts) dockerConfig(volume, secret, dir string) {
	m.SecretDir(volume, secret, dir, corev1.KeyToPath{Key: corev1.DockerConfigJsonKey, Path: "config.json"})
}

func ptrMode(m int32) *int32 { return &m }
