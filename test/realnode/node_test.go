package realnode

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A namespace that enforces the restricted Pod Security Standard admits
// the worker pods: the API server itself checks them, and the run is
// Ready only if every pod it needed was admitted.
func TestRestrictedNamespaceAdmitsWorkerPods(t *testing.T) {
	requireNode(t)
	ns := newNamespace(t, sb, map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	})
	a := newArtifact(sb, ns, "restricted").Obj()
	if err := sb.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	waitReady(t, sb, a)
	g := NewWithT(t)
	pods := ownedPods(g, ns, a.Name)
	g.Expect(pods).NotTo(BeEmpty())
	g.Expect(pods[0].Spec.NodeName).To(Equal(sb.NodeName()))
}

// A worker pod deleted while it runs (downloads held at the fixture hub)
// is replaced, and the run still ends Ready.
func TestWorkerPodDeletedMidRunIsRetried(t *testing.T) {
	requireNode(t)
	ns := newNamespace(t, sb, nil)
	release := sb.HF.Hold()
	defer release()
	a := newArtifact(sb, ns, "deleted-pod").Obj()
	if err := sb.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var victim corev1.Pod
	waitFor(t, func(g Gomega) {
		pods := ownedPods(g, ns, a.Name)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
		victim = pods[0]
	}).Should(Succeed(), "logs in %s", sb.Logs())
	if err := sb.Client.Delete(context.Background(), &victim, client.Preconditions{UID: &victim.UID}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func(g Gomega) {
		err := sb.Client.Get(context.Background(), client.ObjectKeyFromObject(&victim), &corev1.Pod{})
		g.Expect(err).To(HaveOccurred(), "the deleted pod is gone")
	}).Should(Succeed())
	release()
	waitReady(t, sb, a)
	g := NewWithT(t)
	var others []types.UID
	for _, p := range ownedPods(g, ns, a.Name) {
		if p.UID != victim.UID {
			others = append(others, p.UID)
		}
	}
	g.Expect(others).NotTo(BeEmpty(), "a new worker pod ran after %s was deleted", victim.Name)
}

// A run whose push Secret (mounted as a volume into the worker pod) does
// not exist says so in status within 30 s, naming the Secret and the
// field, from the kubelet's own FailedMount event; the pod itself stays
// Pending (ContainerCreating) forever.
func TestMissingPushSecretNamedFromFailedMount(t *testing.T) {
	requireNode(t)
	ns := newNamespace(t, sb, nil)
	a := newArtifact(sb, ns, "no-push-secret").PushSecret("absent-push-creds").Obj()
	start := time.Now()
	if err := sb.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	// What the kubelet says, and where: a FailedMount event naming the
	// Secret; the container waits as ContainerCreating with no message.
	// (The process node says the same: TestProcessNodeMissingSecretVolume.)
	waitFor(t, func(g Gomega) {
		var events corev1.EventList
		g.Expect(sb.Client.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
		var mounts []string
		for _, e := range events.Items {
			if e.Reason == "FailedMount" {
				mounts = append(mounts, e.Message)
			}
		}
		g.Expect(mounts).To(ContainElement(MatchRegexp(`^MountVolume.SetUp failed for volume "[a-z-]+" : secret "absent-push-creds" not found$`)))
		var pods corev1.PodList
		g.Expect(sb.Client.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Status.ContainerStatuses).To(ConsistOf(HaveField("State.Waiting", Equal(&corev1.ContainerStateWaiting{Reason: "ContainerCreating"}))))
	}).Should(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		var msgs []string
		for _, c := range a.Status.Conditions {
			if c.Status == metav1.ConditionTrue || c.Type == "Ready" {
				msgs = append(msgs, c.Message)
			}
		}
		g.Expect(msgs).To(ContainElement(And(ContainSubstring("absent-push-creds"), ContainSubstring("spec.target.pushSecretRef"))),
			"conditions %+v", a.Status.Conditions)
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "logs in %s", sb.Logs())
	t.Logf("status named the missing Secret %s after creation", time.Since(start).Round(time.Millisecond))
}

// Only the sandbox registry is reachable: an image from any other registry
// fails to pull from a closed loopback port (containerd's _default
// hosts.toml), so nothing leaves the machine, not even a DNS lookup.
func TestOtherRegistriesAreNotContacted(t *testing.T) {
	requireNode(t)
	ns := newNamespace(t, sb, nil)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "docker.io/library/busybox:1.36"}},
		},
	}
	if err := sb.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		w := pod.Status.ContainerStatuses[0].State.Waiting
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"))
		g.Expect(w.Message).To(ContainSubstring("127.0.0.1:1"))
	}).Should(Succeed())
}
