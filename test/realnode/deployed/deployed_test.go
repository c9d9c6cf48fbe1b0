// Package deployed runs config/default as released on the sandbox's real
// node: the manager image, built as `make images` builds it, pushed to the
// sandbox registry and pulled by containerd; two replicas with leader
// election, serving the admission webhooks with the certificates they
// provision themselves (cert-controller). The sandbox runs no manager
// process of its own here. Like test/realnode, it runs only as root with
// PACKLINE_REAL_NODE=1 and the node's binaries (`make test-node`).
package deployed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/manifests"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

const (
	systemNS  = "packline-system"
	leaseName = "packline-manager.packline.dev"
)

var (
	sb   *sandbox.Sandbox
	skip string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func gate() string {
	if os.Getenv("PACKLINE_REAL_NODE") != "1" {
		return "PACKLINE_REAL_NODE=1 is not set (make test-node sets it)"
	}
	if os.Geteuid() != 0 {
		return "the real node needs root (network namespaces, mounts, cgroups)"
	}
	for _, env := range []string{"PACKLINE_KUBE_NODE_DIR", "PACKLINE_CONTAINERD_DIR", "PACKLINE_CNI_DIR", "PACKLINE_RUNC_BIN"} {
		if os.Getenv(env) == "" {
			return env + " is not set: run make node-assets, or make test-node"
		}
	}
	return ""
}

func run(m *testing.M) int {
	if skip = gate(); skip != "" {
		return m.Run()
	}
	ctrllog.SetLogger(logr.Discard())
	bin, err := os.MkdirTemp("", "packline-deployed-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	o := sandbox.Options{Node: sandbox.NodeReal, Progress: os.Stderr}
	if o.Dir, err = os.MkdirTemp("", "packline-deployed-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := sandbox.Defaults(&o, bin); err != nil {
		fmt.Fprintln(os.Stderr, "deployed:", err)
		return 1
	}
	// The manager is config/default's Deployment; no Flux is needed.
	o.ManagerBin, o.FluxDir = "", ""
	if sb, err = sandbox.Start(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "deployed: starting the sandbox:", err, "; logs in", filepath.Join(o.Dir, "logs"))
		return 1
	}
	code := m.Run()
	sb.Stop()
	if code == 0 {
		_ = os.RemoveAll(o.Dir)
	} else {
		fmt.Fprintln(os.Stderr, "deployed: sandbox logs kept in", sb.Logs())
	}
	return code
}

func waitFor(t testing.TB, timeout time.Duration, f any) AsyncAssertion {
	return NewWithT(t).Eventually(f).WithTimeout(timeout).WithPolling(250 * time.Millisecond)
}

// TestManagerFailoverRealImages: both replicas of config/default run in
// containers, one holds the Lease, an Artifact reaches Ready through the
// in-cluster manager (admitted by its webhooks); the leader's pod is
// deleted right after a second Artifact is created, the other replica
// takes the Lease, and the second Artifact reaches Ready with exactly one
// Job and one attempt: nothing pushed twice, nothing lost.
func TestManagerFailoverRealImages(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	ctx := context.Background()
	start := time.Now()
	image, err := sb.PushManagerImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manager image %s built and pushed in %s", image, time.Since(start).Round(time.Millisecond))
	deploy(t, image)
	start = time.Now()
	pods := waitDeployment(t)
	t.Logf("2 manager replicas ready %s after apply (pull, start, self-provisioned webhook certificate)", time.Since(start).Round(time.Millisecond))
	g := NewWithT(t)
	for _, p := range pods {
		g.Expect(p.Spec.NodeName).To(Equal(sb.NodeName()))
		g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(HavePrefix("containerd://"), "pod %s runs in a container", p.Name)
		g.Expect(p.Status.ContainerStatuses[0].ImageID).To(ContainSubstring(image[strings.Index(image, "@")+1:]), "pod %s runs the pushed image", p.Name)
	}
	leader := leaderOf(t, pods)
	t.Logf("leader %s", leader)

	ns := tenantNamespace(t)
	first := artifact(ns, "first")
	first.Spec.DeletionPolicy = v1alpha1.DeletionDelete
	g.Expect(sb.Client.Create(ctx, first)).To(Succeed(), "the Artifact is admitted by the in-cluster webhooks")
	waitReady(t, first)
	job := onlyJob(t, ns, first.Name)
	jobPod := jobPods(t, ns, job.Name)
	g.Expect(jobPod.Status.ContainerStatuses[0].ContainerID).To(HavePrefix("containerd://"))

	// The leader creates the second Artifact's Job, then its pod goes:
	// the successor must carry on with that Job, not make another.
	second := artifact(ns, "second")
	g.Expect(sb.Client.Create(ctx, second)).To(Succeed())
	waitFor(t, time.Minute, func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(sb.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelOwnerName: second.Name})).To(Succeed())
		g.Expect(jobs.Items).NotTo(BeEmpty())
	}).Should(Succeed(), "logs in %s", sb.Logs())
	g.Expect(sb.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: leader}},
		client.GracePeriodSeconds(0))).To(Succeed())
	killed := time.Now()
	var successor string
	waitFor(t, 2*time.Minute, func(g Gomega) {
		successor = holder(g)
		g.Expect(successor).NotTo(Equal(leader), "the Lease moves off the deleted pod")
		p := &corev1.Pod{}
		g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: successor}, p)).To(Succeed())
		g.Expect(p.DeletionTimestamp).To(BeNil())
	}).Should(Succeed(), "logs in %s", sb.Logs())
	t.Logf("pod %s took the Lease %s after leader %s was deleted", successor, time.Since(killed).Round(time.Millisecond), leader)

	waitReady(t, second)
	onlyJob(t, ns, second.Name)
	g.Expect(second.Status.Attempts).To(Equal(int32(1)), "one attempt across the failover")
	g.Expect(len(waitDeployment(t))).To(Equal(2), "the ReplicaSet replaced the deleted pod")

	checkCleanupInContainer(t, first)
}

// checkCleanupInContainer deletes a (deletionPolicy Delete) and watches
// its cleanup Job's pod: it must run in a container on the real node and
// succeed, and a go once it has. A watch, not a poll: the Job and its pod
// are collected with a as soon as the manager releases it.
func checkCleanupInContainer(t *testing.T, a *v1alpha1.Artifact) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := sb.Kube.CoreV1().Pods(a.Namespace).Watch(ctx, metav1.ListOptions{
		LabelSelector: pipeline.LabelOwnerName + "=" + a.Name + "," + pipeline.LabelInputs + "=cleanup"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := sb.Client.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	var ran *corev1.Pod
	for ran == nil {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended before the cleanup pod succeeded")
			}
			p, _ := ev.Object.(*corev1.Pod)
			if p != nil && p.Status.Phase == corev1.PodSucceeded {
				ran = p
			}
		case <-ctx.Done():
			t.Fatalf("no cleanup pod of %s succeeded; logs in %s", a.Name, sb.Logs())
		}
	}
	g := NewWithT(t)
	g.Expect(ran.Spec.NodeName).To(Equal(sb.NodeName()))
	g.Expect(ran.Spec.Containers[0].Args).To(Equal([]string{"delete"}))
	g.Expect(ran.Status.ContainerStatuses[0].ContainerID).To(HavePrefix("containerd://"), "the cleanup ran in a container")
	waitFor(t, time.Minute, func(g Gomega) {
		err := sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), &v1alpha1.Artifact{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Artifact is gone once cleaned up: %v", err)
	}).Should(Succeed())
}

// deploy applies config/default with only what differs in the sandbox:
// the images (pushed here, by digest), and the API server's address on the
// bridge (sandbox.APIServerOnBridge: no kube-proxy routes the kubernetes
// Service's ClusterIP here). Namespaces go first, then the admin's install
// step, the webhook client CA ConfigMap (docs/operations/install.md).
func deploy(t *testing.T, managerImage string) {
	t.Helper()
	rendered, err := manifests.Render(filepath.Join(repoRoot(t), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	var nss, rest []*unstructured.Unstructured
	for _, u := range rendered {
		switch u.GetKind() {
		case "Namespace":
			nss = append(nss, u)
			continue
		case "Deployment":
			sandboxDeployment(t, u, managerImage)
		}
		rest = append(rest, u)
	}
	for _, u := range nss {
		if err := sb.Apply(context.Background(), u); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "packline-webhook-client-ca", "namespace": systemNS},
		"data":     map[string]any{"ca.crt": string(sb.WebhookClientCA())},
	}}
	for _, u := range append([]*unstructured.Unstructured{cm}, rest...) {
		if err := sb.Apply(context.Background(), u); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func sandboxDeployment(t *testing.T, u *unstructured.Unstructured, managerImage string) {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	c := &d.Spec.Template.Spec.Containers[0]
	c.Image = managerImage
	found := false
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--worker-image=") {
			c.Args[i], found = "--worker-image="+sb.WorkerImage(), true
		}
	}
	if !found {
		t.Fatal("config/default's Deployment has no --worker-image")
	}
	host, port := sb.APIServerOnBridge()
	c.Env = append(c.Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(port)})
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		t.Fatal(err)
	}
	u.Object = m
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := sandbox.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// waitDeployment waits for two ready replicas and returns the running,
// undeleted pods.
func waitDeployment(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, 5*time.Minute, func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKey{Namespace: systemNS, Name: "packline-manager"}, &d)).To(Succeed())
		var list corev1.PodList
		g.Expect(sb.Client.List(context.Background(), &list, client.InNamespace(systemNS))).To(Succeed())
		pods = pods[:0]
		var states []string
		for _, p := range list.Items {
			states = append(states, fmt.Sprintf("%s %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses))
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && isReady(p) {
				pods = append(pods, p)
			}
		}
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)), "pods: %v", states)
		g.Expect(pods).To(HaveLen(2), "pods: %v", states)
	}).Should(Succeed(), "logs in %s", sb.Logs())
	return pods
}

func isReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// holder is the pod holding the leader-election Lease: client-go's
// identity is "<hostname>_<uuid>", and a pod's hostname is its name.
func holder(g Gomega) string {
	var l coordinationv1.Lease
	g.Expect(sb.Client.Get(context.Background(), client.ObjectKey{Namespace: systemNS, Name: leaseName}, &l)).To(Succeed())
	g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
	name, _, ok := strings.Cut(*l.Spec.HolderIdentity, "_")
	g.Expect(ok).To(BeTrue(), "holder identity %q", *l.Spec.HolderIdentity)
	return name
}

// leaderOf waits for one of pods to hold the Lease and returns its name.
func leaderOf(t *testing.T, pods []corev1.Pod) string {
	t.Helper()
	var name string
	waitFor(t, 2*time.Minute, func(g Gomega) {
		name = holder(g)
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		g.Expect(names).To(ContainElement(name))
	}).Should(Succeed())
	return name
}

func tenantNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("deployed-%d", time.Now().Unix()%100000), Labels: sandbox.TenantLabels,
	}}
	if err := sb.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func artifact(ns, name string) *v1alpha1.Artifact {
	return wrappers.MakeArtifact(name, ns).HF("packline/tiny-model").HFEndpoint(sb.HF.URL).
		Repository(sb.Registry.Host + "/deployed/" + ns + "/" + name).PlainHTTP().Obj()
}

func waitReady(t *testing.T, a *v1alpha1.Artifact) {
	t.Helper()
	waitFor(t, 4*time.Minute, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a)).To(Succeed())
		st := &a.Status
		g.Expect(st.ObservedGeneration).To(Equal(a.Generation))
		ready := false
		for _, c := range st.Conditions {
			g.Expect(c.Type == "Stalled" && c.Status == metav1.ConditionTrue).To(BeFalse(), "stalled: %+v", c)
			ready = ready || (c.Type == "Ready" && c.Status == metav1.ConditionTrue)
		}
		g.Expect(ready).To(BeTrue(), "phase %s, conditions %+v", st.Phase, st.Conditions)
	}).Should(Succeed(), "logs in %s", sb.Logs())
}

// onlyJob asserts owner has exactly one Job and returns it.
func onlyJob(t *testing.T, ns, owner string) batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	if err := sb.Client.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelOwnerName: owner}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 {
		t.Fatalf("%s has %d Jobs, want exactly 1", owner, len(jobs.Items))
	}
	return jobs.Items[0]
}

func jobPods(t *testing.T, ns, job string) corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := sb.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) == 0 {
		t.Fatalf("Job %s: %d pods", job, len(pods.Items))
	}
	return pods.Items[0]
}
