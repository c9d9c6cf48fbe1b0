package realnode

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ImageVolumeArtifactStatus records what containerd does with an image
// volume whose reference is a model artifact (the tiny model as packline
// pushes it, a config that is not an OCI image config): the pod never
// starts, and the container waits with the status below (containerd issues
// #11381 and #11907). The process node must say the same
// (procnode/imagevolume.go).
func TestImageVolumeOfModelArtifactRefused(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	ns := newNamespace(t, sb, nil)
	a := newArtifact(sb, ns, "model").Obj()
	if err := sb.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitReady(t, sb, a)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{
				Name: "server", Image: sb.WorkerImage(), Args: []string{"version"},
				VolumeMounts: []corev1.VolumeMount{{Name: "model", MountPath: "/model"}},
			}},
			Volumes: []corev1.Volume{{Name: "model", VolumeSource: corev1.VolumeSource{
				Image: &corev1.ImageVolumeSource{Reference: a.Status.Reference, PullPolicy: corev1.PullIfNotPresent},
			}}},
		},
	}
	if err := sb.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var waiting *corev1.ContainerStateWaiting
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		waiting = pod.Status.ContainerStatuses[0].State.Waiting
		g.Expect(waiting).NotTo(BeNil())
		g.Expect(waiting.Reason).NotTo(Equal("ContainerCreating"), "message %q", waiting.Message)
	}).Should(Succeed())
	t.Logf("phase %s, container waiting: reason %q, message %q", pod.Status.Phase, waiting.Reason, waiting.Message)
	var events corev1.EventList
	if err := sb.Client.List(ctx, &events, client.InNamespace(ns)); err == nil {
		for _, e := range events.Items {
			if e.InvolvedObject.Name == pod.Name && e.Type == corev1.EventTypeWarning {
				t.Logf("event %s: %s", e.Reason, e.Message)
			}
		}
	}
	g := NewWithT(t)
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
}
