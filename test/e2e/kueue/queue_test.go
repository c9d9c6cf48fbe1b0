package kueue

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
)

// queues applies a ResourceFlavor, a ClusterQueue named like ns with quota
// for workers of the worker's default requests (250m CPU, 256Mi), and the
// LocalQueue "packline" in ns. hold starts the ClusterQueue stopped
// (stopPolicy Hold), so that nothing is admitted until it is resumed.
func queues(t testing.TB, ns string, workers int, hold bool) (clusterQueue string) {
	stop := "None"
	if hold {
		stop = "Hold"
	}
	apply(t, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor`, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %[1]s
spec:
  namespaceSelector: {}
  stopPolicy: %[4]s
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: %[2]dm
      - name: memory
        nominalQuota: %[3]dMi`, ns, 250*workers, 256*workers, stop), fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: packline
  namespace: %s
spec:
  clusterQueue: %s`, ns, ns))
	t.Cleanup(func() {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
		u.SetKind("ClusterQueue")
		u.SetName(ns)
		_ = sb.Client.Delete(context.Background(), u)
	})
	return ns
}

// jobWatch follows the Jobs of ns: the most that ran at once (admitted,
// that is unsuspended, and not finished) and the order Jobs were admitted.
type jobWatch struct {
	mu       sync.Mutex
	running  map[string]bool
	admitted []string
	peak     int
	stop     func()
}

func watchJobs(t testing.TB, ns string) *jobWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := sb.Kube.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	jw := &jobWatch{running: map[string]bool{}, stop: func() { cancel(); w.Stop() }}
	seen := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			jw.mu.Lock()
			unsuspended := j.Spec.Suspend == nil || !*j.Spec.Suspend
			if unsuspended && !seen[j.Name] {
				seen[j.Name] = true
				jw.admitted = append(jw.admitted, j.Labels[pipeline.LabelOwnerName])
			}
			jw.running[j.Name] = ev.Type != watch.Deleted && unsuspended && !finished(j)
			n := 0
			for _, r := range jw.running {
				if r {
					n++
				}
			}
			jw.peak = max(jw.peak, n)
			jw.mu.Unlock()
		}
	}()
	t.Cleanup(jw.stop)
	return jw
}

func (jw *jobWatch) state() (peak, running int, admitted []string) {
	jw.mu.Lock()
	defer jw.mu.Unlock()
	for _, r := range jw.running {
		if r {
			running++
		}
	}
	return jw.peak, running, append([]string(nil), jw.admitted...)
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func workloads(g Gomega, ns string) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	l.SetKind("WorkloadList")
	g.Expect(sb.Client.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	return l.Items
}

// Ten Artifacts on a queue whose quota fits three workers: Kueue admits
// three at a time, the others say in status and in kubectl get that they
// are queued and Kueue's reason, and all ten end Ready.
func TestKueueAdmitsThreeAtATime(t *testing.T) {
	ns := newNamespace(t)
	queues(t, ns, 3, false)
	jw := watchJobs(t, ns)
	// Downloads wait, so the three admitted runs hold their quota while
	// the test looks at the seven queued ones.
	release := sb.HF.Hold()
	defer release()
	var arts []*v1alpha1.Artifact
	for i := range 10 {
		a := newArtifact(ns, fmt.Sprintf("model-%d", i), "packline").Obj()
		create(t, a)
		arts = append(arts, a)
	}
	waitFor(t, func(g Gomega) {
		_, running, _ := jw.state()
		g.Expect(running).To(Equal(3), "Jobs admitted and running")
		queued := 0
		for _, a := range arts {
			cur := &v1alpha1.Artifact{}
			g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), cur)).To(Succeed())
			if cur.Status.Phase != v1alpha1.PhaseQueued {
				continue
			}
			c := ready(&cur.Status)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(pipeline.ReasonQuotaNotReserved), "%s: %s", cur.Name, c.Message)
			g.Expect(c.Message).To(ContainSubstring("insufficient"), cur.Name)
			queued++
		}
		g.Expect(queued).To(Equal(7))
	}).Should(Succeed(), "logs in %s", sb.Logs())

	out, err := exec.Command("kubectl", "--kubeconfig", sb.Kubeconfig, "get", "artifacts", "-n", ns).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	t.Logf("kubectl get artifacts, while queued:\n%s", out)
	if n := strings.Count(string(out), "Queued"); n != 7 || strings.Count(string(out), pipeline.ReasonQuotaNotReserved) != 7 {
		t.Errorf("kubectl get shows %d Queued rows, want 7 each with reason %s:\n%s", n, pipeline.ReasonQuotaNotReserved, out)
	}
	var one v1alpha1.Artifact
	for _, a := range arts {
		if err := sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), &one); err == nil && one.Status.Phase == v1alpha1.PhaseQueued {
			t.Logf("a queued Artifact's Ready condition: %s: %s", ready(&one.Status).Reason, ready(&one.Status).Message)
			break
		}
	}

	release()
	for _, a := range arts {
		waitFor(t, func(g Gomega) {
			cur := &v1alpha1.Artifact{}
			g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), cur)).To(Succeed())
			c := ready(&cur.Status)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s %s: %s", cur.Name, cur.Status.Phase, c.Reason, c.Message)
		}).Should(Succeed(), "logs in %s", sb.Logs())
	}
	peak, _, admitted := jw.state()
	t.Logf("peak of Jobs running at once: %d (admitted %d)", peak, len(admitted))
	if peak > 3 {
		t.Errorf("%d Jobs ran at once, the quota fits 3", peak)
	}
	if len(admitted) != 10 {
		t.Errorf("%d Jobs admitted, want 10", len(admitted))
	}
}

// Deleting an Artifact whose Job waits in the queue leaves no Job,
// Workload or workspace PVC behind.
func TestKueueDeleteQueued(t *testing.T) {
	ns := newNamespace(t)
	queues(t, ns, 1, true)
	a := newArtifact(ns, "waiting", "packline").Obj()
	create(t, a)
	waitFor(t, func(g Gomega) {
		cur := &v1alpha1.Artifact{}
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), cur)).To(Succeed())
		g.Expect(cur.Status.Phase).To(Equal(v1alpha1.PhaseQueued))
		g.Expect(workloads(g, ns)).To(HaveLen(1))
		var pvcs corev1.PersistentVolumeClaimList
		g.Expect(sb.Client.List(context.Background(), &pvcs, client.InNamespace(ns))).To(Succeed())
		g.Expect(pvcs.Items).To(HaveLen(1))
		t.Logf("queued on a held ClusterQueue: %s: %s", ready(&cur.Status).Reason, ready(&cur.Status).Message)
	}).Should(Succeed(), "logs in %s", sb.Logs())
	if err := sb.Client.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(sb.Client.List(context.Background(), &jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(BeEmpty(), "Jobs")
		g.Expect(workloads(g, ns)).To(BeEmpty(), "Workloads")
		var pvcs corev1.PersistentVolumeClaimList
		g.Expect(sb.Client.List(context.Background(), &pvcs, client.InNamespace(ns))).To(Succeed())
		g.Expect(pvcs.Items).To(BeEmpty(), "PVCs")
	}).Should(Succeed(), "logs in %s", sb.Logs())
}

// An Artifact with a WorkloadPriorityClass of higher value, created last,
// is admitted first when the queue opens.
func TestKueuePriorityFirst(t *testing.T) {
	ns := newNamespace(t)
	cq := queues(t, ns, 1, true)
	apply(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: urgent-%s
value: 1000
description: runs before the rest`, ns))
	jw := watchJobs(t, ns)
	var arts []*v1alpha1.Artifact
	for i := range 3 {
		a := newArtifact(ns, fmt.Sprintf("routine-%d", i), "packline").Obj()
		create(t, a)
		arts = append(arts, a)
	}
	urgent := newArtifact(ns, "urgent", "packline").Obj()
	urgent.Spec.WorkloadPriorityClassName = "urgent-" + ns
	create(t, urgent)
	arts = append(arts, urgent)
	waitFor(t, func(g Gomega) {
		wls := workloads(g, ns)
		g.Expect(wls).To(HaveLen(4))
		for _, wl := range wls {
			if owner := wl.GetOwnerReferences(); len(owner) == 1 && strings.HasPrefix(owner[0].Name, "urgent-") {
				p, _, _ := unstructured.NestedInt64(wl.Object, "spec", "priority")
				g.Expect(p).To(Equal(int64(1000)), "the urgent Workload's priority")
			}
		}
	}).Should(Succeed(), "logs in %s", sb.Logs())
	open := &unstructured.Unstructured{}
	open.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	open.SetKind("ClusterQueue")
	open.SetName(cq)
	if err := sb.Client.Patch(context.Background(), open, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stopPolicy":"None"}}`))); err != nil {
		t.Fatal(err)
	}
	for _, a := range arts {
		waitFor(t, func(g Gomega) {
			cur := &v1alpha1.Artifact{}
			g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), cur)).To(Succeed())
			g.Expect(ready(&cur.Status)).NotTo(BeNil())
			g.Expect(ready(&cur.Status).Status).To(Equal(metav1.ConditionTrue), "%s: %s", cur.Name, ready(&cur.Status).Message)
		}).Should(Succeed(), "logs in %s", sb.Logs())
	}
	peak, _, admitted := jw.state()
	t.Logf("admission order: %v (peak %d)", admitted, peak)
	if len(admitted) == 0 || admitted[0] != "urgent" {
		t.Errorf("admission order %v: the urgent Artifact, created last, should be first", admitted)
	}
	if peak > 1 {
		t.Errorf("%d Jobs ran at once, the quota fits 1", peak)
	}
}

// Kueue v0.17 defaults the queue of every Job created without one in a
// namespace that has a LocalQueue named "default" (LocalQueueDefaulting,
// GA and locked on): an Artifact without spec.queueName is queued there
// too, and says so.
func TestKueueDefaultLocalQueueTakesUnqueuedJobs(t *testing.T) {
	ns := newNamespace(t)
	cq := queues(t, ns, 1, true)
	apply(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: default
  namespace: %s
spec:
  clusterQueue: %s`, ns, cq))
	a := newArtifact(ns, "unqueued", "").Obj()
	create(t, a)
	waitFor(t, func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(sb.Client.List(context.Background(), &jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1))
		g.Expect(jobs.Items[0].Labels).To(HaveKeyWithValue(pipeline.QueueLabel, "default"))
		g.Expect(jobs.Items[0].Spec.Suspend).To(HaveValue(BeTrue()))
		cur := &v1alpha1.Artifact{}
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), cur)).To(Succeed())
		g.Expect(cur.Status.Phase).To(Equal(v1alpha1.PhaseQueued))
		t.Logf("unqueued Artifact in a namespace with LocalQueue default: %s: %s", ready(&cur.Status).Reason, ready(&cur.Status).Message)
	}).Should(Succeed(), "logs in %s", sb.Logs())
}
