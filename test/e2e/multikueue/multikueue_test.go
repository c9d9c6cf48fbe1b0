package multikueue

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/sandbox"
)

// An Artifact with spec.queue is dispatched by MultiKueue: its worker runs
// on the worker cluster and pushes to the registry both clusters share;
// the digest comes back through the read-back Job on the management
// cluster, which gets no workspace PVC and runs no worker pod of its own.
func TestMultiKueueDispatchesToWorkerCluster(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := watchWorker(t, ns)
	a := newArtifact(ns, "model").Obj()
	if err := sb.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	trail := watchStatus(t, a)
	got := waitReady(t, a)
	for _, l := range trail.seen() {
		t.Logf("status: %s", l)
	}
	g := NewWithT(t)
	g.Expect(got.Status.Digest).To(HavePrefix("sha256:"))
	// The image view the worker pushed beside the artifact is read back
	// too (before, a dispatched run's status.imageDigest stayed empty).
	g.Expect(got.Status.ImageDigest).To(HavePrefix("sha256:"))

	// The run's Job on the worker cluster, made by MultiKueue, succeeded
	// with a pod on the worker cluster's node. (MultiKueue deletes it once
	// the Workload has finished, so the watch saw it.)
	g.Expect(w.jobs()).To(Equal(map[string]string{jobName(t, ns): "Complete"}))
	g.Expect(w.pods()).To(ConsistOf(workerPod{Node: sandbox.WorkerNodeName, Command: "artifact", Phase: corev1.PodSucceeded}))

	// The management cluster: the dispatched Job (never run here) and the
	// read-back Job; no PVC, and no pod but the read-back's.
	var pvcs corev1.PersistentVolumeClaimList
	g.Expect(sb.Client.List(ctx, &pvcs, client.InNamespace(ns))).To(Succeed())
	g.Expect(pvcs.Items).To(BeEmpty())
	for _, p := range pods(t, sb.Client, ns) {
		g.Expect(p.Spec.Containers[0].Args).To(Equal([]string{"resolve"}), "pod %s", p.Name)
	}

	tags, manifests := pushed(t, got)
	g.Expect(tags).To(ConsistOf(wantTags(got)))
	g.Expect(manifests).To(ConsistOf(wantManifests(got)))
}

// wantTags are the tags one run pushes: the target tag, and the image
// view's tag (sha256-<artifact digest>.image) when it has one.
func wantTags(a *v1alpha1.Artifact) []string {
	tags := []string{a.Status.Tag}
	if a.Status.ImageDigest != "" {
		tags = append(tags, strings.Replace(a.Status.Digest, ":", "-", 1)+".image")
	}
	return tags
}

// wantManifests are the manifests one run pushes: the artifact and its
// image view.
func wantManifests(a *v1alpha1.Artifact) []string {
	m := []string{a.Status.Digest}
	if a.Status.ImageDigest != "" {
		m = append(m, a.Status.ImageDigest)
	}
	return m
}

func waitReady(t testing.TB, a *v1alpha1.Artifact) *v1alpha1.Artifact {
	t.Helper()
	got := &v1alpha1.Artifact{}
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), got)).To(Succeed())
		c := ready(&got.Status)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
	}).Should(Succeed())
	return got
}

// jobName is the name of the one dispatched Job on the management
// cluster in ns.
func jobName(t testing.TB, ns string) string {
	t.Helper()
	var names []string
	for _, j := range dispatchedJobs(t, ns) {
		names = append(names, j.Name)
	}
	if len(names) != 1 {
		t.Fatalf("dispatched Jobs in %s: %v, want one", ns, names)
	}
	return names[0]
}

// dispatchedJobs are the management cluster's Jobs in ns handed to
// MultiKueue, by name.
func dispatchedJobs(t testing.TB, ns string) []batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	if err := sb.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range jobs.Items {
		if j.Spec.ManagedBy != nil && *j.Spec.ManagedBy == sandbox.MultiKueueJobManagedBy {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
	return out
}

// workerPod is what the watch keeps of a worker cluster pod.
type workerPod struct {
	Node, Command string
	Phase         corev1.PodPhase
}

// workerWatch follows ns on the worker cluster: the Jobs MultiKueue makes
// there (and deletes once their Workload finishes) and their pods.
type workerWatch struct {
	mu      sync.Mutex
	jobSeen map[string]string
	podSeen map[string]workerPod
}

func watchWorker(t testing.TB, ns string) *workerWatch {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kube := sb.Worker().Kube
	jw, err := kube.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := &workerWatch{jobSeen: map[string]string{}, podSeen: map[string]workerPod{}}
	go func() {
		for ev := range jw.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				w.mu.Lock()
				w.jobSeen[j.Name] = jobState(j)
				w.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev := range pw.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && len(p.Spec.Containers) > 0 {
				w.mu.Lock()
				w.podSeen[p.Name] = workerPod{Node: p.Spec.NodeName, Command: strings.Join(p.Spec.Containers[0].Args, " "), Phase: p.Status.Phase}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// jobState is a Job's finished condition, or "Active"/"Suspended".
func jobState(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return string(c.Type)
		}
	}
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		return "Suspended"
	}
	return "Active"
}

func (w *workerWatch) jobs() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.jobSeen)
}

func (w *workerWatch) pods() []workerPod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Collect(maps.Values(w.podSeen))
}

func pods(t testing.TB, c client.Client, ns string) []corev1.Pod {
	t.Helper()
	var l corev1.PodList
	if err := c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// pushed reads the registry's storage for the Artifact's repository: its
// tags and the digests of every manifest ever pushed to it (distribution
// keeps a revision link per manifest, whether a tag still names it or not).
func pushed(t testing.TB, a *v1alpha1.Artifact) (tags, manifests []string) {
	t.Helper()
	repo := strings.TrimPrefix(a.Spec.Target.Repository, sb.Registry.Host+"/")
	base := filepath.Join(regDir, "docker", "registry", "v2", "repositories", repo, "_manifests")
	tagEntries, err := os.ReadDir(filepath.Join(base, "tags"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tagEntries {
		tags = append(tags, e.Name())
	}
	revs, err := os.ReadDir(filepath.Join(base, "revisions", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range revs {
		manifests = append(manifests, "sha256:"+e.Name())
	}
	return tags, manifests
}
