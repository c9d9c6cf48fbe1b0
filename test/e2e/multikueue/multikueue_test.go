package multikueue

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	a := newArtifact(ns, "model").Obj()
	if err := sb.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, a)
	g := NewWithT(t)
	g.Expect(got.Status.Digest).To(HavePrefix("sha256:"))

	// The run's Job on the worker cluster, made by MultiKueue, succeeded
	// with a pod on the worker cluster's node.
	wj := workerJobs(t, ns)
	g.Expect(wj).To(HaveLen(1))
	g.Expect(wj[0].Status.Succeeded).To(Equal(int32(1)))
	wp := pods(t, sb.Worker().Client, ns)
	g.Expect(wp).NotTo(BeEmpty())
	for _, p := range wp {
		g.Expect(p.Spec.NodeName).To(Equal(sandbox.WorkerNodeName))
		g.Expect(p.Spec.Containers[0].Args).To(Equal([]string{"artifact"}))
	}

	// The management cluster: the dispatched Job (never run here) and the
	// read-back Job; no PVC, and no pod but the read-back's.
	var jobs batchv1.JobList
	g.Expect(sb.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
	var dispatched int
	for _, j := range jobs.Items {
		if j.Spec.ManagedBy != nil && *j.Spec.ManagedBy == sandbox.MultiKueueJobManagedBy {
			dispatched++
		}
	}
	g.Expect(dispatched).To(Equal(1))
	var pvcs corev1.PersistentVolumeClaimList
	g.Expect(sb.Client.List(ctx, &pvcs, client.InNamespace(ns))).To(Succeed())
	g.Expect(pvcs.Items).To(BeEmpty())
	for _, p := range pods(t, sb.Client, ns) {
		g.Expect(p.Spec.Containers[0].Args).To(Equal([]string{"resolve"}), "pod %s", p.Name)
	}

	tags, manifests := pushed(t, got)
	g.Expect(tags).To(Equal([]string{got.Status.Tag}))
	g.Expect(manifests).To(ContainElement(got.Status.Digest))
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

// workerJobs are the Jobs MultiKueue made on the worker cluster in ns,
// by attempt.
func workerJobs(t testing.TB, ns string) []batchv1.Job {
	t.Helper()
	var jobs batchv1.JobList
	if err := sb.Worker().Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	sort.Slice(jobs.Items, func(i, k int) bool { return jobs.Items[i].Name < jobs.Items[k].Name })
	return jobs.Items
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
