package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/loopback"
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
	var doc workerv1.Artifact
	for _, e := range jobs.Items[0].Spec.Template.Spec.Containers[0].Env {
		if e.Name == workerv1.EnvSpec {
			if err := workerv1.DecodeSpec([]byte(e.Value), &doc); err != nil {
				b.Fatal(err)
			}
		}
	}
	doc.Target.Repository += "-direct"
	raw, err := workerv1.EncodeSpec(doc)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cmd := exec.Command(workerBin, "artifact")
	cmd.Env = []string{
		workerv1.EnvSpec + "=" + raw, "PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir,
		"PACKLINE_WORKSPACE=" + filepath.Join(dir, "ws"), "PACKLINE_TERMINATION_LOG=" + filepath.Join(dir, "term"),
	}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("direct worker: %v\n%s", err, out)
	}
	return time.Since(start)
}

// BenchmarkArtifactsToJobs times a manager creating the Jobs of 1,000 and
// then 5,000 Artifacts, against a bare client creating the same PVC+Job
// pairs (copied from the manager's) with as many workers as the manager has
// reconcilers, in the same run.
//
// The manager is a second instance (--instance, no webhooks), started once
// the Artifacts, labelled for it, exist: its time runs from its start
// (process start and cache sync included) until the last Job exists. The
// Artifacts' own creation, through the main manager's webhooks, is the
// user's client's work; timed together on two shared cores it would be
// charged to the controller, so it is reported apart (apply-s). Each size
// has its own instance, so its RSS is that of exactly n Artifacts, Jobs and
// PVCs: read when the last Job appears, and again after the bare client's
// run, whose copies carry the same labels and must not enter its cache.
//
// The Artifacts name a queue, so their Jobs are created suspended and no pod
// runs: this measures the control loop, not workers.
//
// PACKLINE_BENCH_SIZES=1000 runs one size only; PACKLINE_BENCH_WORKERS=8
// sets both the manager's --max-concurrent-reconciles and the bare
// client's workers (default: the manager's default).
// PACKLINE_BENCH_PROFILE=<dir> writes CPU profiles of the manager and of
// kube-apiserver during each size's run, and the manager's request and
// reconcile counters, there (go tool pprof merges the slices).
func BenchmarkArtifactsToJobs(b *testing.B) {
	workers := pipeline.DefaultConfig().MaxConcurrentReconciles
	if env := os.Getenv("PACKLINE_BENCH_WORKERS"); env != "" {
		var err error
		if workers, err = strconv.Atoi(env); err != nil || workers <= 0 {
			b.Fatalf("PACKLINE_BENCH_WORKERS=%q: not a positive count", env)
		}
	}
	profileDir := os.Getenv("PACKLINE_BENCH_PROFILE")
	for _, n := range benchSizes(b) {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			for i := range b.N {
				instance := fmt.Sprintf("bench-%d-%d", n, i)
				ns := newNamespace(b)
				objs := make([]client.Object, n)
				for i := range objs {
					a := newArtifact(ns, fmt.Sprintf("a%04d", i), "packline/tiny-model").Obj()
					a.Spec.QueueName = "bench"
					a.Labels = map[string]string{pipeline.LabelInstance: instance}
					objs[i] = a
				}
				start := time.Now()
				createAll(b, objs, 16)
				applied := time.Since(start)

				extra := []string{fmt.Sprintf("--max-concurrent-reconciles=%d", workers)}
				var pprofURL, metricsURL string
				if profileDir != "" {
					pprofAddr, metricsAddr := freeAddr(b), freeAddr(b)
					extra = append(extra, "--pprof-bind-address="+pprofAddr, "--metrics-bind-address="+metricsAddr, "--metrics-secure=false")
					pprofURL, metricsURL = "http://"+pprofAddr+"/debug/pprof", "http://"+metricsAddr+"/metrics"
				}
				waitJobs := watchJobs(b, ns)
				cpu0 := sandboxCPU(b)
				start = time.Now()
				m, err := sb.StartInstance(instance, extra...)
				if err != nil {
					b.Fatal(err)
				}
				var profile, apiProfile func()
				if pprofURL != "" {
					profile = startCPUProfile(b, pprofURL, filepath.Join(profileDir, fmt.Sprintf("manager-%d.pprof", n)))
					apiProfile = startAPIServerProfile(b, filepath.Join(profileDir, fmt.Sprintf("apiserver-%d.pprof", n)))
				}
				firstJob := waitJobs(n)
				managerTime := time.Since(start)
				cpu1 := sandboxCPU(b)
				instanceCPU, err := m.CPU()
				if err != nil {
					b.Fatal(err)
				}
				rss, _, err := m.Memory()
				if err != nil {
					b.Fatal(err)
				}
				if profile != nil {
					profile()
					apiProfile()
					saveMetrics(b, metricsURL, filepath.Join(profileDir, fmt.Sprintf("metrics-%d.txt", n)))
					saveAPIServerMetrics(b, filepath.Join(profileDir, fmt.Sprintf("apiserver-metrics-%d.txt", n)))
				}

				pairs := copyPairs(b, ns)
				cpu2 := sandboxCPU(b)
				bare := timeCreate(b, pairs, workers)
				cpu3 := sandboxCPU(b)
				rssAfter, peak, err := m.Memory()
				if err != nil {
					b.Fatal(err)
				}
				if pprofURL != "" {
					saveURL(b, pprofURL+"/heap", filepath.Join(profileDir, fmt.Sprintf("manager-heap-%d.pprof", n)))
				}
				m.Stop()

				b.ReportMetric(applied.Seconds(), "apply-s")
				b.ReportMetric(managerTime.Seconds(), "manager-jobs-s")
				b.ReportMetric(firstJob.Sub(start).Seconds(), "manager-first-job-s")
				// Where each run's time went: CPU seconds of each process
				// while it ran (the main manager idles; the instance is ours).
				b.ReportMetric(instanceCPU.Seconds(), "manager-cpu-s")
				for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
					b.ReportMetric((cpu1[name] - cpu0[name]).Seconds(), name+"-cpu-s")
					b.ReportMetric((cpu3[name] - cpu2[name]).Seconds(), name+"-bare-cpu-s")
				}
				b.ReportMetric(bare.Seconds(), "bare-s")
				b.ReportMetric(float64(workers), "workers")
				b.ReportMetric(float64(managerTime)/float64(bare), "ratio")
				b.ReportMetric(float64(rss)/(1<<20), "manager-rss-MiB")
				b.ReportMetric(float64(rssAfter)/(1<<20), "manager-rss-after-bare-MiB")
				b.ReportMetric(float64(peak)/(1<<20), "manager-peak-rss-MiB")
			}
		})
	}
}

// benchSizes are the Artifact counts of BenchmarkArtifactsToJobs: 1,000 and
// 5,000, or PACKLINE_BENCH_SIZES (comma-separated) for a quicker look.
func benchSizes(b *testing.B) []int {
	env := os.Getenv("PACKLINE_BENCH_SIZES")
	if env == "" {
		return []int{1000, 5000}
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("PACKLINE_BENCH_SIZES=%q: %q is not a positive count", env, f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// freeAddr returns a loopback address that no other server of this process
// was given (see loopback.FreePort).
func freeAddr(b *testing.B) string {
	port, err := loopback.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// saveMetrics writes the manager's request and reconcile counters to path:
// how many API calls, of which verbs and results, the run cost.
func saveMetrics(b *testing.B, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Logf("metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var keep []string
	for _, line := range strings.Split(string(raw), "\n") {
		for _, p := range []string{"rest_client_requests_total", "controller_runtime_reconcile_total", "controller_runtime_reconcile_time_seconds_sum", "workqueue_adds_total", "workqueue_queue_duration_seconds_sum", "workqueue_work_duration_seconds_sum"} {
			if strings.HasPrefix(line, p) {
				keep = append(keep, line)
			}
		}
	}
	_ = os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// saveURL writes what url serves to path (a heap profile).
func saveURL(b *testing.B, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Logf("%s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	_ = os.WriteFile(path, raw, 0o644)
}

// saveAPIServerMetrics writes kube-apiserver's request latencies by verb and
// resource, and its priority-and-fairness queue waits, to path.
func saveAPIServerMetrics(b *testing.B, path string) {
	hc, err := rest.HTTPClientFor(sb.Config)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(sb.Config.Host, "/") + "/metrics")
	if err != nil {
		b.Logf("apiserver metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var keep []string
	for _, line := range strings.Split(string(raw), "\n") {
		for _, p := range []string{"apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count", "apiserver_flowcontrol_request_wait_duration_seconds_sum", "apiserver_flowcontrol_request_wait_duration_seconds_count", "etcd_request_duration_seconds_sum", "etcd_request_duration_seconds_count"} {
			if strings.HasPrefix(line, p) {
				keep = append(keep, line)
			}
		}
	}
	_ = os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
}

// startAPIServerProfile profiles kube-apiserver (its /debug/pprof, as an
// administrator) like startCPUProfile does the manager.
func startAPIServerProfile(b *testing.B, path string) func() {
	hc, err := rest.HTTPClientFor(sb.Config)
	if err != nil {
		b.Fatal(err)
	}
	return profileLoop(b, hc, strings.TrimSuffix(sb.Config.Host, "/")+"/debug/pprof", path)
}

// startCPUProfile starts a CPU profile of the manager; the returned func
// ends it.
func startCPUProfile(b *testing.B, base, path string) func() {
	return profileLoop(b, http.DefaultClient, base, path)
}

// profileLoop writes CPU profiles from base (a /debug/pprof URL) to
// path.00, path.01... until the returned func is called. The endpoint
// profiles for a fixed time and writes nothing if cut short, so it samples
// in 10-second slices (the last one runs on a little); go tool pprof merges
// the files given together.
func profileLoop(b *testing.B, hc *http.Client, base, path string) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := hc.Get(base + "/profile?seconds=10")
			if err != nil {
				b.Logf("profile: %v", err)
				return
			}
			f, err := os.Create(fmt.Sprintf("%s.%02d", path, i))
			if err == nil {
				_, _ = io.Copy(f, resp.Body)
				f.Close()
			}
			resp.Body.Close()
		}
	}()
	return func() { close(stop); <-done }
}

func sandboxCPU(b *testing.B) map[string]time.Duration {
	cpu, err := sb.CPU()
	if err != nil {
		b.Fatal(err)
	}
	return cpu
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

// watchJobs starts watching ns for Jobs; the returned func waits until n
// distinct Jobs were added, and returns when the first was. A watch, not a poll: listing up to 5,000 Jobs
// ten times a second cost the API server more than the manager's own
// requests, and so slowed what it measured.
func watchJobs(b *testing.B, ns string) (wait func(n int) (first time.Time)) {
	mc, err := metadata.NewForConfig(sb.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	w, err := mc.Resource(batchv1.SchemeGroupVersion.WithResource("jobs")).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	return func(n int) (first time.Time) {
		defer cancel()
		defer w.Stop()
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			if m, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Added {
				if len(seen) == 0 {
					first = time.Now()
				}
				seen[m.GetName()] = true
			}
			if len(seen) >= n {
				return first
			}
		}
		b.Fatalf("%d of %d Jobs in %s when the watch ended (logs in %s)", len(seen), n, ns, sb.Logs())
		return first
	}
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
