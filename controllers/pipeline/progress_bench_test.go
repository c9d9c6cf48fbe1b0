package pipeline

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/test/wrappers"
)

// BenchmarkProgressAt1000Running measures what status.progress costs the
// manager with 1,000 imports running: one simulated minute of steady
// state, reconciled by the real Pipeline.Reconcile against a fake client
// (which counts API requests) and a fake log source (a real worker's log
// tail: human lines, layer lines and a progress line), on a simulated
// clock. The baseline, measured in the same run, is the same minute with
// progress off: each Running object is reconciled once (its pod turning
// Running) and then only on events. It reports, per simulated second:
// reconciles, client reads (the cache's, in a real manager), API writes,
// status patches, log reads, and the reconcile CPU time (process CPU, so that waiting for a CPU on a shared
// machine does not count); and the ratios on/off.
//
// What it leaves out: the API server's and kubelets' side of each log
// read (a proxied GET of at most 16 lines / 16 KiB), and watch traffic
// from the status patches, which the figures bound by count. The CPU
// figures include the fake client's own cost (its tracker builds a REST
// mapper on every write), so they overstate a real manager's; the counts
// are exact.
func BenchmarkProgressAt1000Running(b *testing.B) {
	n := 1000
	if env := os.Getenv("PACKLINE_BENCH_RUNNING"); env != "" {
		var err error
		if n, err = strconv.Atoi(env); err != nil || n <= 0 {
			b.Fatalf("PACKLINE_BENCH_RUNNING=%q: not a positive count", env)
		}
	}
	logf.SetLogger(logr.Discard())
	const minute = time.Minute
	var off, on simResult
	for range b.N {
		off = simulateRunning(b, n, minute, false)
		on = simulateRunning(b, n, minute, true)
	}
	secs := minute.Seconds()
	for _, m := range []struct {
		name    string
		off, on float64
	}{
		{"reconciles/s", float64(off.reconciles), float64(on.reconciles)},
		{"cache-reads/s", float64(off.cacheReads), float64(on.cacheReads)},
		{"api-writes/s", float64(off.writes), float64(on.writes)},
		{"status-patches/s", float64(off.patches), float64(on.patches)},
		{"log-reads/s", float64(off.logReads), float64(on.logReads)},
		{"cpu-ms/s", float64(off.cpu.Microseconds()) / 1000, float64(on.cpu.Microseconds()) / 1000},
	} {
		b.ReportMetric(m.off/secs, "off-"+m.name)
		b.ReportMetric(m.on/secs, "on-"+m.name)
	}
	// API requests: writes, plus the log reads (each a GET the API server
	// proxies to a kubelet).
	b.ReportMetric(float64(on.writes+on.logReads)/float64(max(off.writes+off.logReads, 1)), "api-requests-ratio")
	b.ReportMetric(float64(on.cpu)/float64(max(off.cpu, 1)), "cpu-ratio")
	b.ReportMetric(float64(on.cpu.Microseconds())/float64(max(on.reconciles, 1)), "on-cpu-us/reconcile")
	b.ReportMetric(float64(off.cpu.Microseconds())/float64(max(off.reconciles, 1)), "off-cpu-us/reconcile")
	b.ReportMetric(float64(on.withProgress), "on-objects-with-progress")
}

type simResult struct {
	reconciles, cacheReads, writes, logReads, patches int
	withProgress                                      int
	cpu                                               time.Duration
}

// simLogs is a worker log tail whose progress line moves with the clock.
type simLogs struct {
	now   func() time.Time
	start time.Time
	reads atomic.Int64
}

func (l *simLogs) Tail(_ context.Context, _, pod, _ string, lines, limitBytes int64) ([]byte, error) {
	l.reads.Add(1)
	el := l.now().Sub(l.start)
	done := int64(el.Seconds()) * (40 << 20)
	var b strings.Builder
	for i := range lines - 2 {
		fmt.Fprintf(&b, "layer model-%05d-of-00099.safetensors uploaded (sha256:%064d, 5368709120 bytes)\n", i, i)
	}
	fmt.Fprintf(&b, "download: %d/102400 MiB, 40.0 MiB/s, ETA 40m\n", done>>20)
	workerv1.WriteProgress(&b, workerv1.Progress{Step: workerv1.StepDownload, Done: done, Total: 100 << 30, Rate: 40 << 20})
	out := b.String()
	return []byte(out[:min(int64(len(out)), limitBytes)]), nil
}

type due struct {
	at  time.Time
	obj int
}

type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func simulateRunning(b *testing.B, n int, span time.Duration, progress bool) simResult {
	b.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	// reads are cache reads in a real manager (p.Client); writes reach
	// the API server.
	var reads, writes, patches atomic.Int64
	// idx serves the steady state's Job, PVC and pod lists as the
	// manager's cache does, from an index; the fake client would copy
	// every object of the kind per list, which no real manager does.
	var idx *childIndex
	count := interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			reads.Add(1)
			if idx != nil {
				if ok := idx.list(list, opts); ok {
					return nil
				}
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.Add(1)
			patches.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
	uid := func(o client.Object) []string {
		if v := o.GetLabels()[LabelOwnerUID]; v != "" {
			return []string{v}
		}
		return nil
	}
	objs := make([]*v1alpha1.Artifact, n)
	builder := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.Artifact{}).
		WithIndex(&batchv1.Job{}, IndexOwnerUID, uid).WithIndex(&corev1.PersistentVolumeClaim{}, IndexOwnerUID, uid).
		WithInterceptorFuncs(count)
	for i := range objs {
		a := wrappers.MakeArtifact(fmt.Sprintf("a%04d", i), "bench").Obj()
		a.UID = types.UID(fmt.Sprintf("uid-%04d", i))
		a.Generation = 1
		objs[i] = a
		builder = builder.WithObjects(a)
	}
	c := builder.Build()

	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	clk := func() time.Time { return now }
	cfg := DefaultConfig()
	cfg.Now = clk
	p := &Pipeline{Client: c, APIReader: c, Config: cfg, Kind: "Artifact"}
	logs := &simLogs{now: clk, start: start}
	if progress {
		p.Progress = NewProgressReader(logs, cfg.ProgressInterval, cfg.ProgressQPS, cfg.ProgressConcurrency)
		p.Progress.Now = clk
	}
	prepare := func(context.Context) (Work, error) {
		return Work{Command: "artifact", Spec: map[string]string{"source": "hf"}, InputsHash: "h1", Tag: "latest"}, nil
	}
	reconcile := func(i int) time.Duration {
		a := &v1alpha1.Artifact{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(objs[i]), a); err != nil {
			b.Fatal(err)
		}
		res, err := p.Reconcile(ctx, a, prepare)
		if err != nil {
			b.Fatalf("reconcile %s: %v", a.Name, err)
		}
		return res.RequeueAfter
	}

	// Bring every object to Running: the first reconcile makes its Job,
	// then its pod runs, and the pod's event reconciles it again.
	for i := range objs {
		reconcile(i)
	}
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs); err != nil {
		b.Fatal(err)
	}
	if len(jobs.Items) != n {
		b.Fatalf("%d Jobs, want %d", len(jobs.Items), n)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.UID == "" {
			// The fake client assigns none; the pods' owner reference and
			// OwnPods need one.
			j.UID = types.UID("job-" + j.Name)
			if err := c.Update(ctx, j); err != nil {
				b.Fatal(err)
			}
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x", Namespace: j.Namespace,
				Labels:          map[string]string{batchv1.JobNameLabel: j.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
				{Name: workerContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.List(ctx, &jobs); err != nil || jobs.Items[0].UID == "" {
		b.Fatalf("Jobs without a UID (err %v)", err)
	}

	idx = newChildIndex(b, c)

	// The measured minute: the pod events arrive spread over its first
	// seconds; each reconcile's RequeueAfter schedules the next.
	reads.Store(0)
	writes.Store(0)
	patches.Store(0)
	logs.reads.Store(0)
	var r simResult
	h := &dueHeap{}
	for i := range objs {
		heap.Push(h, due{at: start.Add(time.Duration(i) * 10 * time.Second / time.Duration(n)), obj: i})
	}
	end := start.Add(span)
	for h.Len() > 0 {
		d := heap.Pop(h).(due)
		if d.at.After(end) {
			break
		}
		now = d.at
		t0 := processCPU()
		again := reconcile(d.obj)
		r.cpu += processCPU() - t0
		r.reconciles++
		if again > 0 {
			heap.Push(h, due{at: now.Add(again), obj: d.obj})
		}
	}
	// The bench's own Get of each object before its reconcile is the
	// work queue handing over a cached object: not counted.
	r.cacheReads, r.writes, r.patches, r.logReads = int(reads.Load())-r.reconciles, int(writes.Load()), int(patches.Load()), int(logs.reads.Load())
	for i := range objs {
		a := &v1alpha1.Artifact{}
		_ = c.Get(ctx, client.ObjectKeyFromObject(objs[i]), a)
		if a.Status.Phase != v1alpha1.PhaseRunning {
			b.Fatalf("%s is %s, want Running", a.Name, a.Status.Phase)
		}
		if a.Status.Progress != nil {
			r.withProgress++
		}
	}
	return r
}

// childIndex is a snapshot of the children, by owner UID and Job name.
type childIndex struct {
	jobs map[string][]batchv1.Job
	pvcs map[string][]corev1.PersistentVolumeClaim
	pods map[string][]corev1.Pod
}

func newChildIndex(b *testing.B, c client.Client) *childIndex {
	ctx := context.Background()
	x := &childIndex{jobs: map[string][]batchv1.Job{}, pvcs: map[string][]corev1.PersistentVolumeClaim{}, pods: map[string][]corev1.Pod{}}
	var jobs batchv1.JobList
	var pvcs corev1.PersistentVolumeClaimList
	var pods corev1.PodList
	if err := errors.Join(c.List(ctx, &jobs), c.List(ctx, &pvcs), c.List(ctx, &pods)); err != nil {
		b.Fatal(err)
	}
	for _, j := range jobs.Items {
		x.jobs[j.Labels[LabelOwnerUID]] = append(x.jobs[j.Labels[LabelOwnerUID]], j)
	}
	for _, v := range pvcs.Items {
		x.pvcs[v.Labels[LabelOwnerUID]] = append(x.pvcs[v.Labels[LabelOwnerUID]], v)
	}
	for _, p := range pods.Items {
		x.pods[p.Labels[batchv1.JobNameLabel]] = append(x.pods[p.Labels[batchv1.JobNameLabel]], p)
	}
	return x
}

// list answers the pipeline's indexed lists: by owner UID (Jobs, PVCs) and
// by job-name label (pods).
func (x *childIndex) list(list client.ObjectList, opts []client.ListOption) bool {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	owner, byOwner := "", false
	if lo.FieldSelector != nil {
		owner, byOwner = lo.FieldSelector.RequiresExactMatch(IndexOwnerUID)
	}
	switch l := list.(type) {
	case *batchv1.JobList:
		if byOwner {
			for _, j := range x.jobs[owner] {
				l.Items = append(l.Items, *j.DeepCopy())
			}
			return true
		}
	case *corev1.PersistentVolumeClaimList:
		if byOwner {
			for _, v := range x.pvcs[owner] {
				l.Items = append(l.Items, *v.DeepCopy())
			}
			return true
		}
	case *corev1.PodList:
		if lo.LabelSelector != nil {
			if name, ok := lo.LabelSelector.RequiresExactMatch(batchv1.JobNameLabel); ok {
				for _, p := range x.pods[name] {
					l.Items = append(l.Items, *p.DeepCopy())
				}
				return true
			}
		}
	}
	return false
}

// processCPU is the process's user and system CPU time so far: on a
// shared machine, wall time would count the waits for a CPU too.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
