package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/jobs/spec"
)

// BenchmarkApplyToReadyOverhead measures what packline adds around a small
// Artifact's worker run: create → Ready through the real control plane and
// process node, against the same worker run directly on the host with the
// same spec (to a fresh repository, so it uploads as much). The difference
// is the operator's overhead (Job and pod creation, binding, status
// round-trips, reconcile latency).
func BenchmarkApplyToReadyOverhead(b *testing.B) {
	const runs = 5
	var total, direct []time.Duration
	for range b.N {
		for i := range runs {
			ns := newNamespace(b)
			a := newArtifact(ns, fmt.Sprintf("bench-%d", i), "packline/tiny-model").Obj()
			start := time.Now()
			create(b, a)
			waitReadyFast(b, a)
			total = append(total, time.Since(start))
			direct = append(direct, runWorkerDirect(b, ns, a))
		}
	}
	t, d := median(total), median(direct)
	b.ReportMetric(ms(t), "apply-to-ready-ms")
	b.ReportMetric(ms(d), "worker-direct-ms")
	b.ReportMetric(ms(t-d), "overhead-ms")
	b.ReportMetric(float64(t)/float64(d), "ratio")
}

// waitReadyFast polls more often than waitReady, for timing.
func waitReadyFast(b *testing.B, a *v1alpha1.Artifact) {
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		if err := sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), a); err == nil && isTrue(&a.Status, "Ready") {
			return
		}
	}
	b.Fatalf("%s not Ready: %+v (logs in %s)", a.Name, a.Status, sb.Logs())
}

// runWorkerDirect runs the worker binary with the spec the manager gave a's
// Job, retargeted to a new repository, and returns its wall time.
func runWorkerDirect(b *testing.B, ns string, a *v1alpha1.Artifact) time.Duration {
	var jobs batchv1.JobList
	if err := sb.Client.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelOwnerName: a.Name}); err != nil || len(jobs.Items) != 1 {
		b.Fatalf("jobs of %s: %v %d", a.Name, err, len(jobs.Items))
	}
	var doc spec.Artifact
	for _, e := range jobs.Items[0].Spec.Template.Spec.Containers[0].Env {
		if e.Name == spec.EnvSpec {
			if err := spec.Decode([]byte(e.Value), &doc); err != nil {
				b.Fatal(err)
			}
		}
	}
	doc.Target.Repository += "-direct"
	raw, err := spec.Encode(doc)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cmd := exec.Command(workerBin, "artifact")
	cmd.Env = []string{
		spec.EnvSpec + "=" + raw, "PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir,
		"PACKLINE_WORKSPACE=" + filepath.Join(dir, "ws"), "PACKLINE_TERMINATION_LOG=" + filepath.Join(dir, "term"),
	}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("direct worker: %v\n%s", err, out)
	}
	return time.Since(start)
}

// BenchmarkThousandArtifacts applies 1,000 Artifacts at once and measures
// the time until all 1,000 Jobs exist, against a bare client creating the
// same PVC+Job pairs (copied from the manager's) in the same run: once one
// pair at a time, like the manager's single reconcile worker, and once
// with 8 workers. The Artifacts name a queue, so their Jobs are created
// suspended and no pod runs: this measures the control loop, not workers.
func BenchmarkThousandArtifacts(b *testing.B) {
	const n = 1000
	for range b.N {
		ns := newNamespace(b)
		objs := make([]client.Object, n)
		for i := range objs {
			a := newArtifact(ns, fmt.Sprintf("a%04d", i), "packline/tiny-model").Obj()
			a.Spec.QueueName = "bench"
			objs[i] = a
		}
		start := time.Now()
		createAll(b, objs, 16)
		applied := time.Since(start)
		waitJobs(b, ns, n)
		managerTime := time.Since(start)
		rss, peak, err := sb.ManagerMemory()
		if err != nil {
			b.Fatal(err)
		}

		pairs := copyPairs(b, ns)
		serial := timeCreate(b, pairs, 1)
		parallel := timeCreate(b, pairs, 8)

		b.ReportMetric(applied.Seconds(), "apply-s")
		b.ReportMetric(managerTime.Seconds(), "manager-jobs-s")
		b.ReportMetric(serial.Seconds(), "bare-serial-s")
		b.ReportMetric(parallel.Seconds(), "bare-8workers-s")
		b.ReportMetric(float64(managerTime)/float64(serial), "ratio-vs-serial")
		b.ReportMetric(float64(managerTime)/float64(parallel), "ratio-vs-8workers")
		b.ReportMetric(float64(rss)/(1<<20), "manager-rss-MiB")
		b.ReportMetric(float64(peak)/(1<<20), "manager-peak-rss-MiB")
	}
}

func createAll(b testing.TB, objs []client.Object, workers int) {
	ch := make(chan client.Object)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range ch {
				if err := sb.Client.Create(context.Background(), o); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("create %s: %w", o.GetName(), err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, o := range objs {
		ch <- o
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// waitJobs polls the Job count (metadata only, to keep the poll cheap).
func waitJobs(b *testing.B, ns string, n int) {
	deadline := time.Now().Add(15 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ; time.Now().Before(deadline); <-tick.C {
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
		if err := sb.Client.List(context.Background(), &l, client.InNamespace(ns)); err == nil && len(l.Items) >= n {
			return
		}
	}
	b.Fatalf("fewer than %d Jobs in %s after 15m (logs in %s)", n, ns, sb.Logs())
}

// copyPairs returns the manager's PVCs and Jobs stripped of server-set and
// owner fields, ready to create elsewhere.
func copyPairs(b *testing.B, ns string) [][2]client.Object {
	var jobs batchv1.JobList
	var pvcs corev1.PersistentVolumeClaimList
	if err := sb.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	if err := sb.Client.List(context.Background(), &pvcs, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	byName := map[string]*corev1.PersistentVolumeClaim{}
	for i := range pvcs.Items {
		byName[pvcs.Items[i].Name] = &pvcs.Items[i]
	}
	var out [][2]client.Object
	for i := range jobs.Items {
		j := &jobs.Items[i]
		pvc := byName[pipeline.WorkspaceName(j.Labels[pipeline.LabelOwnerName])]
		if pvc == nil {
			b.Fatalf("no workspace for job %s", j.Name)
		}
		nj := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: j.Name, Labels: j.Labels}, Spec: j.Spec}
		nj.Spec.Selector = nil
		nj.Spec.Template.Labels = map[string]string{}
		for k, v := range j.Spec.Template.Labels {
			if k != "controller-uid" && k != "job-name" && k != batchv1.ControllerUidLabel && k != batchv1.JobNameLabel {
				nj.Spec.Template.Labels[k] = v
			}
		}
		np := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: pvc.Name, Labels: pvc.Labels}, Spec: pvc.Spec}
		np.Spec.VolumeName = ""
		out = append(out, [2]client.Object{np, nj})
	}
	return out
}

// timeCreate creates every pair in a new namespace with the given number
// of workers and returns the time taken.
func timeCreate(b *testing.B, pairs [][2]client.Object, workers int) time.Duration {
	ns := newNamespace(b)
	var objs []client.Object
	for _, p := range pairs {
		for _, o := range p {
			c := o.DeepCopyObject().(client.Object)
			c.SetNamespace(ns)
			objs = append(objs, c)
		}
	}
	start := time.Now()
	if workers == 1 {
		for _, o := range objs {
			if err := sb.Client.Create(context.Background(), o); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		createAll(b, objs, workers)
	}
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
