package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/hfserver"
)

// workerTmpSize is the sizeLimit of the worker's /tmp emptyDir on this
// sandbox (--worker-tmp-size, set in main_test.go): small, so that the
// eviction test fills it with a few MiB. The worker itself never writes
// there, so no other test notices.
const workerTmpSize = "4Mi"

// waitFailed waits for a's run to end Failed with reason and returns the
// Ready condition's message, what `kubectl describe` shows.
func waitFailed(t testing.TB, a *v1alpha1.Artifact, reason string) string {
	t.Helper()
	var msg string
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		ready := condition(&a.Status, "Ready")
		g.Expect(ready).NotTo(BeNil())
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseFailed), "ready: %+v", ready)
		g.Expect(ready.Reason).To(Equal(reason), "message %q", ready.Message)
		msg = ready.Message
	}).Should(Succeed(), "logs in %s", sb.Logs())
	return msg
}

// A worker whose memory limit is below what its source needs is killed by
// the kernel (runc puts the limit on the container's memory cgroup) and the
// run says so, naming the field to raise, instead of "exit code 137". The
// source is a Hub repository of 150,000 files: the worker decodes its
// model info (about 28 MB of JSON, under the worker's own 64 MiB cap) in
// memory. (The tiny model alone runs under the same limit: tried.)
func TestWorkerOOMKilledOnRealNode(t *testing.T) {
	requireNode(t)
	files := map[string][]byte{"config.json": []byte(`{}`)}
	pad := strings.Repeat("x", 80)
	for i := 0; i < 150000; i++ {
		files[fmt.Sprintf("shards/%s-%06d.json", pad, i)] = []byte{byte(i)}
	}
	hub, err := hfserver.StartOn(sb.ServeIP(), map[string]hfserver.Repo{"packline/huge-listing": {Files: files}})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	ns := newNamespace(t, sb, nil)
	a := newArtifact(sb, ns, "oom").HF("packline/huge-listing").HFEndpoint(hub.URL).RetryLimit(0).Obj()
	limit := resource.MustParse("12Mi")
	a.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: limit},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
	}
	if err := sb.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	msg := waitFailed(t, a, pipeline.ReasonOOMKilled)
	t.Logf("status message: %s", msg)
	g := NewWithT(t)
	g.Expect(msg).To(ContainSubstring("spec.resources.limits.memory (" + limit.String() + ")"))

	// The kubelet's own record agrees: the container was OOM-killed.
	pods := ownedPods(g, ns, a.Name)
	g.Expect(pods).NotTo(BeEmpty())
	cs := pods[0].Status.ContainerStatuses
	g.Expect(cs).NotTo(BeEmpty())
	g.Expect(cs[0].State.Terminated).NotTo(BeNil())
	g.Expect(cs[0].State.Terminated.Reason).To(Equal("OOMKilled"))
}

// A worker pod whose /tmp emptyDir grows past its sizeLimit is evicted by
// the kubelet's eviction manager, and the run quotes the kubelet. The
// worker never writes to /tmp, so the test writes there from the host,
// into the emptyDir's directory under the kubelet's root, while the
// fixture hub holds the worker's download.
func TestWorkerEvictedOverTmpSizeLimitOnRealNode(t *testing.T) {
	requireNode(t)
	hub, err := hfserver.StartOn(sb.ServeIP(), map[string]hfserver.Repo{"packline/tiny-model": hfserver.TinyModel()})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	release := hub.Hold()
	defer release()

	ns := newNamespace(t, sb, nil)
	a := newArtifact(sb, ns, "evicted").HFEndpoint(hub.URL).RetryLimit(0).Obj()
	if err := sb.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	waitFor(t, func(g Gomega) {
		pods := ownedPods(g, ns, a.Name)
		g.Expect(pods).NotTo(BeEmpty())
		pod = pods[0]
		g.Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty())
		g.Expect(pod.Status.ContainerStatuses[0].State.Running).NotTo(BeNil(), "worker not running yet")
	}).Should(Succeed(), "logs in %s", sb.Logs())

	dir := filepath.Join(opts.Dir, "realnode", "kubelet", "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "tmp")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the worker's /tmp emptyDir on the host: %v", err)
	}
	size := resource.MustParse(workerTmpSize)
	if err := os.WriteFile(filepath.Join(dir, "fill"), make([]byte, 2*size.Value()), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	msg := waitFailed(t, a, pipeline.ReasonEvicted)
	t.Logf("evicted %s after the write; status message: %s", time.Since(start).Round(time.Second), msg)
	g := NewWithT(t)
	g.Expect(msg).To(ContainSubstring("evicted by the kubelet"))
	g.Expect(msg).To(ContainSubstring(`"tmp"`), "the kubelet names the volume")
	g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
	g.Expect(pod.Status.Reason).To(Equal("Evicted"))
}
