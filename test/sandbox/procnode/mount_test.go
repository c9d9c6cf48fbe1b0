package procnode

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// testNode is a Node on a fake clientset, with its events recorded.
func testNode(t *testing.T, objs ...runtime.Object) (*Node, *record.FakeRecorder, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	n := New(Options{Name: "node", Dir: t.TempDir(), Client: client, Images: map[string]Image{"worker": {Binary: "/bin/true"}}})
	rec := record.NewFakeRecorder(10)
	n.recorder, n.scheduler = rec, rec
	n.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	t.Cleanup(n.queue.ShutDown)
	return n, rec, client
}

func mountingPod(vols ...corev1.Volume) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec:       corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "worker", Image: "worker"}}, Volumes: vols},
	}
	for _, v := range vols {
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
	return pod
}

func secretVolume(name, secret string, keys ...string) corev1.Volume {
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
	for _, k := range keys {
		v.Secret.Items = append(v.Secret.Items, corev1.KeyToPath{Key: k, Path: k})
	}
	return v
}

// TestVolumeMountFailuresAreTheKubelets: a volume the kubelet cannot set
// up leaves the pod in ContainerCreating, with no message, and a
// FailedMount Warning event worded as the kubelet's.
func TestVolumeMountFailuresAreTheKubelets(t *testing.T) {
	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "opaque", Namespace: "ns"}, Data: map[string][]byte{"password": []byte("x")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}
	cases := []struct {
		name  string
		vol   corev1.Volume
		event string
	}{
		{"missing secret", secretVolume("push-auth", "push", ".dockerconfigjson"),
			`Warning FailedMount MountVolume.SetUp failed for volume "push-auth" : secret "push" not found`},
		{"secret without the key", secretVolume("push-auth", "opaque", ".dockerconfigjson"),
			`Warning FailedMount MountVolume.SetUp failed for volume "push-auth" : references non-existent secret key: .dockerconfigjson`},
		{"missing configmap", corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}}},
			`Warning FailedMount MountVolume.SetUp failed for volume "conf" : configmap "nope" not found`},
		{"configmap without the key", corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{{Key: "k", Path: "k"}}}}},
			`Warning FailedMount MountVolume.SetUp failed for volume "conf" : configmap references non-existent config key: k`},
		{"PVC deleted after scheduling", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gone"}}},
			`Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC ns/gone: failed to fetch PVC from API server: persistentvolumeclaims "gone" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := mountingPod(tc.vol)
			n, rec, client := testNode(t, pod, opaque, cm)
			if err := n.start(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if got := <-rec.Events; got != tc.event {
				t.Errorf("event:\n got %s\nwant %s", got, tc.event)
			}
			got, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := []corev1.ContainerStatus{{Name: "worker", Image: "worker",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
			if diff := cmp.Diff(want, got.Status.ContainerStatuses); diff != "" {
				t.Errorf("container statuses (-want +got):\n%s", diff)
			}
			if got.Status.Phase != corev1.PodPending {
				t.Errorf("phase = %s", got.Status.Phase)
			}
			if n.run(pod.UID) != nil {
				t.Error("a container started")
			}
		})
	}
}

// TestOptionalSecretVolumeMounts: an optional Secret volume mounts without
// the Secret or its keys, as on a kubelet.
func TestOptionalSecretVolumeMounts(t *testing.T) {
	v := secretVolume("signing-key", "cosign", "cosign.key")
	v.Secret.Optional = ptr.To(true)
	pod := mountingPod(v)
	n, _, _ := testNode(t, pod)
	if _, err := n.prepare(context.Background(), pod); err != nil {
		t.Fatalf("prepare: %v", err)
	}
}

// TestMissingClaimIsUnschedulable: kube-scheduler does not bind a pod whose
// PVC does not exist; it says so in PodScheduled and a FailedScheduling
// event.
func TestMissingClaimIsUnschedulable(t *testing.T) {
	pod := mountingPod(corev1.Volume{Name: "source-volume", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	pod.Spec.NodeName = ""
	n, rec, client := testNode(t, pod)
	if err := n.bind(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	const msg = `0/1 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`
	if got, want := <-rec.Events, "Warning FailedScheduling "+msg; got != want {
		t.Errorf("event:\n got %s\nwant %s", got, want)
	}
	got, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "" {
		t.Errorf("bound to %s", got.Spec.NodeName)
	}
	var cond *corev1.PodCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == corev1.PodScheduled {
			cond = &got.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable || cond.Message != msg {
		t.Errorf("PodScheduled = %+v", cond)
	}
}

// TestEphemeralVolumeClaim: a generic ephemeral volume is mounted from the
// claim the ephemeral volume controller makes (<pod>-<volume>): the pod is
// not bound while it is missing (the scheduler's message), and a claim of
// that name that the pod does not control is refused, as the kubelet does.
func TestEphemeralVolumeClaim(t *testing.T) {
	vol := corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{},
	}}}
	pod := mountingPod(vol)
	n, _, client := testNode(t, pod)
	ctx := context.Background()
	missing, err := n.missingClaims(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{`waiting for ephemeral volume controller to create the persistentvolumeclaim "p-workspace"`}, missing); d != "" {
		t.Errorf("missing claims (-want +got):\n%s", d)
	}
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "p-workspace", Namespace: "ns"}}
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = n.volumes(ctx, pod, t.TempDir())
	if want := `MountVolume.SetUp failed for volume "workspace" : PVC ns/p-workspace was not created for pod ns/p (pod is not owner)`; err == nil || err.Error() != want {
		t.Errorf("a claim the pod does not own: %v, want %s", err, want)
	}
	owned := foreign.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod.UID, Controller: ptr.To(true)}}
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, owned, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dirs, err := n.volumes(ctx, pod, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dirs["workspace"], n.claimDir("ns", "p-workspace"); got != want {
		t.Errorf("workspace mounted from %q, want the claim's folder %q", got, want)
	}
}
