package pipeline

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// TestResolveJobMountsOnlyTheTarget: the Job that reads a dispatched run's
// result from the registry gets the push credentials and CA, and none of
// the run's other mounts (source Secrets, source PVC, signing key).
func TestResolveJobMountsOnlyTheTarget(t *testing.T) {
	var m Mounts
	m.SecretEnv(workerv1.EnvHFToken, corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"})
	m.SecretKeys("source-auth", "git", workerv1.SourceAuthDir, GitCredentialKeys...)
	m.Volumes = append(m.Volumes, corev1.Volume{Name: "source-volume", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: true}}})
	m.Mounts = append(m.Mounts, corev1.VolumeMount{Name: "source-volume", MountPath: workerv1.SourceVolumeDir, ReadOnly: true})
	m.Target(v1alpha1.Target{
		PushSecretRef: &corev1.LocalObjectReference{Name: "push"},
		CASecretRef:   &corev1.LocalObjectReference{Name: "ca"},
	}, "r.example.com/m")
	m.SigningKey("cosign")

	a := &v1alpha1.Artifact{ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "ml", UID: "u", Generation: 2}}
	s := &scope{obj: a, owner: owner, work: Work{Mounts: m, InputsHash: "abcdef0123456789"}}
	p := &Pipeline{Config: DefaultConfig()}
	job := p.buildResolveJob(s, 1, "{}")
	pod := job.Spec.Template.Spec

	wantVolumes := []corev1.Volume{
		{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: tmpDir(p.Config.WorkerTmpSize)}},
		{Name: VolumePushAuth, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "push",
			Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}}, DefaultMode: ptr.To[int32](0o440)}}},
		{Name: VolumeRegistryCA, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "ca",
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}, DefaultMode: ptr.To[int32](0o440)}}},
	}
	if diff := cmp.Diff(wantVolumes, pod.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: workerv1.WorkspaceDir},
		{Name: "tmp", MountPath: workerv1.TmpDir},
		{Name: VolumePushAuth, MountPath: workerv1.PushAuthDir, ReadOnly: true},
		{Name: VolumeRegistryCA, MountPath: workerv1.CADir, ReadOnly: true},
	}
	if diff := cmp.Diff(wantMounts, pod.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	var fromSecrets []string
	for _, e := range pod.Containers[0].Env {
		if e.ValueFrom != nil {
			fromSecrets = append(fromSecrets, e.Name)
		}
		if e.Name == workerv1.EnvDockerConfig && e.Value != workerv1.PushAuthDir {
			t.Errorf("%s = %q", e.Name, e.Value)
		}
	}
	if diff := cmp.Diff([]string(nil), fromSecrets); diff != "" {
		t.Errorf("env from Secrets (-want +got):\n%s", diff)
	}
	if pod.Containers[0].Args[0] != "resolve" {
		t.Errorf("args = %v", pod.Containers[0].Args)
	}
}
