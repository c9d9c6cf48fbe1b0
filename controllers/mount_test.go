package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// creatingPod plays the Job controller (the pod) and a kubelet that cannot
// mount one of its volumes: the pod stays in ContainerCreating, and only a
// FailedMount event, worded as the kubelet's, says why.
func creatingPod(t *testing.T, job *batchv1.Job, mountMessage string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := wrappers.MakePod(job.Name+"-x", job.Namespace, job.Name).Labels(job.Spec.Template.Labels).ControlledBy(job).Obj()
	pod.Spec = *job.Spec.Template.Spec.DeepCopy()
	create(t, pod)
	pod.Status = wrappers.MakePod("", "", "").Creating().Status
	NewWithT(t).Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	now := metav1.Now()
	create(t, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + ".failedmount", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, FieldPath: ""},
		Reason: pipeline.ReasonFailedMount, Type: corev1.EventTypeWarning, Message: mountMessage,
		Source: corev1.EventSource{Component: "kubelet", Host: "node"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	})
	return pod
}

// TestMountFailureReported: a worker pod that the kubelet holds in
// ContainerCreating because a volume cannot be mounted (a missing push or
// CA Secret, a Secret without the expected key) is reported within 30 s,
// with the kubelet's message and the Secret and the field that names it;
// once the kubelet starts the pod, the run goes on with no edit.
func TestMountFailureReported(t *testing.T) {
	cases := []struct {
		name    string
		a       func(ns string) *v1alpha1.Artifact
		kubelet string
		want    []string
	}{
		{"push secret missing", func(ns string) *v1alpha1.Artifact {
			return wrappers.MakeArtifact("nopush", ns).PushSecret("team-push").Obj()
		}, `MountVolume.SetUp failed for volume "push-auth" : secret "team-push" not found`,
			[]string{`secret "team-push" not found`, `Secret "team-push" (spec.target.pushSecretRef, key .dockerconfigjson)`, "goes on by itself"}},
		{"push secret of another type", func(ns string) *v1alpha1.Artifact {
			return wrappers.MakeArtifact("opaque", ns).PushSecret("opaque").Obj()
		}, `MountVolume.SetUp failed for volume "push-auth" : references non-existent secret key: .dockerconfigjson`,
			[]string{`references non-existent secret key: .dockerconfigjson`, `Secret "opaque" (spec.target.pushSecretRef, key .dockerconfigjson)`}},
		{"CA secret missing", func(ns string) *v1alpha1.Artifact {
			return wrappers.MakeArtifact("noca", ns).CASecret("team-ca").Obj()
		}, `MountVolume.SetUp failed for volume "registry-ca" : secret "team-ca" not found`,
			[]string{`secret "team-ca" not found`, `Secret "team-ca" (spec.target.caSecretRef, key ca.crt)`}},
		{"source PVC deleted after scheduling", func(ns string) *v1alpha1.Artifact {
			return wrappers.MakeArtifact("nopvc", ns).Volume("models").Obj()
		}, `Unable to attach or mount volumes: unmounted volumes=[source-volume], unattached volumes=[], failed to process volumes=[source-volume]: error processing PVC ns/models: failed to fetch PVC from API server: persistentvolumeclaims "models" not found`,
			[]string{`persistentvolumeclaims "models" not found`, `PersistentVolumeClaim "models" (spec.source.volume.claimName)`}},
	}
	startManager(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			a := tc.a(ns)
			key := client.ObjectKeyFromObject(a)
			create(t, a)
			job := waitJob(t, ns, key.Name, 1, 1)
			pod := creatingPod(t, job, tc.kubelet)
			NewWithT(t).Eventually(func(g Gomega) {
				got := getArtifact(g, key)
				ready := condition(got, v1alpha1.ConditionReady)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Reason).To(Equal(pipeline.ReasonFailedMount))
				for _, w := range tc.want {
					g.Expect(ready.Message).To(ContainSubstring(w))
				}
				g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhasePending))
			}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
			// The Secret appears; the kubelet starts the container.
			eventually(t, func(g Gomega) {
				p := &corev1.Pod{}
				g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), p)).To(Succeed())
				p.Status = wrappers.MakePod("", "", "").Running().Status
				g.Expect(env.Client.Status().Update(context.Background(), p)).To(Succeed())
			})
			eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseRunning)) })
		})
	}
}
