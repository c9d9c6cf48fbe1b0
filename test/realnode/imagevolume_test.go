package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What containerd 2.2 does with an image volume whose reference is a model
// artifact (the tiny model as packline pushes it: a ModelKit, whose config
// is not an OCI image config and whose layers have kitops media types): it
// pulls the manifest and config only ("reference for unknown type:
// application/vnd.kitops.modelkit.config.v1+json" in its log, no layer
// byte read), unpacks nothing, and mounts an empty folder. The pod runs;
// the server finds no model. (containerd issues #11381 and #11907.) The
// process node must do the same (procnode/imagevolume.go).
func TestImageVolumeOfModelKitMountsEmpty(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	ns := newNamespace(t, sb, nil)
	a := newArtifact(sb, ns, "model").Obj()
	if err := sb.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitReady(t, sb, a)

	entries, err := os.ReadDir(mountedModel(t, ns, a.Status.Reference))
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred(), "/model is mounted")
	g.Expect(entries).To(BeEmpty(), "containerd unpacks no layer of a ModelKit: the server sees no model file")
}

// The image view the worker pushes beside the ModelKit (status.
// imageReference: an image manifest over the same layers) is what
// containerd mounts: the server reads the model's files in /model.
func TestImageViewOfModelKitMounts(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	ns := newNamespace(t, sb, nil)
	a := newArtifact(sb, ns, "model").Obj()
	if err := sb.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitReady(t, sb, a)
	g := NewWithT(t)
	g.Expect(a.Status.ImageReference).NotTo(BeEmpty(), "the Artifact names its image view")

	dir := mountedModel(t, ns, a.Status.ImageReference)
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		g.Expect(err).NotTo(HaveOccurred(), "the server reads /model/%s", f)
		g.Expect(b).NotTo(BeEmpty(), "/model/%s", f)
	}
}

// mountedModel runs a pod that mounts reference as an image volume at
// /model and returns that folder as the container sees it (through its
// root in /proc).
func mountedModel(t *testing.T, ns, reference string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{
				// The pause image only waits: the test looks at /model
				// from the host, through the container's root.
				Name: "server", Image: sb.PauseImage(),
				VolumeMounts: []corev1.VolumeMount{{Name: "model", MountPath: "/model"}},
			}},
			Volumes: []corev1.Volume{{Name: "model", VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{Reference: reference, PullPolicy: corev1.PullIfNotPresent},
			}}},
		},
	}
	if err := sb.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "conditions %+v, containers %+v", pod.Status.Conditions, pod.Status.ContainerStatuses)
	}).Should(Succeed())
	pid := containerPid(t, strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://"))
	return filepath.Join("/proc", strconv.Itoa(pid), "root", "model")
}

// containerPid finds a container's process through its cgroup (the
// kubelet's cgroupfs layout names the folder after the container ID).
func containerPid(t *testing.T, id string) int {
	t.Helper()
	var pid int
	_ = filepath.WalkDir("/sys/fs/cgroup/pids/kubepods", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() != id {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid, _ = strconv.Atoi(f[0])
		}
		return filepath.SkipAll
	})
	if pid == 0 {
		t.Fatalf("no process for container %s", id)
	}
	return pid
}
