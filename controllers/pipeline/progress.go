package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// status.progress of a Running run comes from the last progress line of
// its worker's log (workerv1.Progress), which the manager reads through
// the API server's pods/log, as `kubectl logs --tail` does.
//
// Why the log, and not something the worker writes: the worker pod mounts
// no ServiceAccount token, so it can write nothing through the API server
// (status, an annotation, a lease); keeping it that way is worth more than
// a push channel. The termination message is read only once the container
// ends, too late for progress. The log is kept by the kubelet anyway.
//
// What it costs is bounded three ways: at most one read per object per
// Interval (10 s, so a change shows within 15 s with the worker printing
// every 5 s), at most QPS reads per second and Concurrency at once for the
// whole manager (beyond Interval×QPS running objects, each one is read
// less often rather than the API server and kubelets more), and each read
// is one GET of the last progressTailLines lines, at most
// progressLimitBytes, with a timeout. The reads never block or fail a
// reconcile: progress is advisory.
//
// The log is not trusted: only a well-formed progress line counts (fixed
// prefix, closed step set, bounded numbers: workerv1.ParseProgress), and
// status shows numbers and a summary the manager formats from them. No
// other log text reaches status, an event or the manager's own log.

// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get

// Bounds of one log read.
const (
	progressTailLines  int64 = 16
	progressLimitBytes int64 = 16 << 10
	progressTimeout          = 5 * time.Second
)

// Defaults of the progress reader (manager flags --progress-interval,
// --progress-qps, --progress-concurrency).
const (
	DefaultProgressInterval    = 10 * time.Second
	DefaultProgressQPS         = 20
	DefaultProgressConcurrency = 4
)

// LogTail reads the end of a container's log.
type LogTail interface {
	Tail(ctx context.Context, namespace, pod, container string, lines, limitBytes int64) ([]byte, error)
}

// PodLogs reads through the API server's pods/log subresource (RBAC: get
// pods/log).
type PodLogs struct{ Client kubernetes.Interface }

// Tail is one bounded GET .../pods/<pod>/log?tailLines=&limitBytes=.
func (l PodLogs) Tail(ctx context.Context, ns, pod, container string, lines, limitBytes int64) ([]byte, error) {
	return l.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, TailLines: ptr.To(lines), LimitBytes: ptr.To(limitBytes),
	}).DoRaw(ctx)
}

// ProgressReader reads running workers' progress at a bounded rate. One
// serves every reconciler of a manager, so the bounds are the manager's.
type ProgressReader struct {
	Logs LogTail
	// Interval is the least time between two reads of one object's worker.
	Interval time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	// period is 1/QPS: reads start at least this far apart.
	period time.Duration
	slots  chan struct{}

	mu sync.Mutex
	// next is the first free start time of a read (see slot).
	next time.Time
	// last is when each object's worker was last read; reserved, the
	// start time given to an object waiting for its turn.
	last     map[types.UID]time.Time
	reserved map[types.UID]time.Time
}

// NewProgressReader bounds reads to one per object per interval, qps per
// second and concurrency at once.
func NewProgressReader(logs LogTail, interval time.Duration, qps float32, concurrency int) *ProgressReader {
	return &ProgressReader{
		Logs: logs, Interval: interval,
		period:   time.Duration(float64(time.Second) / float64(max(qps, 0.001))),
		slots:    make(chan struct{}, max(concurrency, 1)),
		last:     map[types.UID]time.Time{},
		reserved: map[types.UID]time.Time{},
	}
}

func (r *ProgressReader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// take starts a read of uid's worker now, or says how long until the
// object should ask again: the rest of its interval, or its turn among
// the reads of the whole manager. An object over the rate is given a start
// time (a reservation) rather than turned away, so that it comes back
// once, when a read is sure to be granted: with more running objects than
// Interval×QPS, each one is read less often, at no extra reconciles.
func (r *ProgressReader) take(uid types.UID) (wait time.Duration, ok bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, has := r.reserved[uid]; has {
		if now.Before(at) {
			return at.Sub(now), false
		}
	} else {
		if last, seen := r.last[uid]; seen {
			if next := last.Add(r.Interval); now.Before(next) {
				return next.Sub(now), false
			}
		}
		if at := r.slot(now); at.After(now) {
			r.reserved[uid] = at
			return at.Sub(now), false
		}
	}
	select {
	case r.slots <- struct{}{}:
	default:
		// As many reads in flight as allowed (a slow API server): the
		// reservation, if any, stands.
		return r.busyRetry(), false
	}
	delete(r.reserved, uid)
	r.last[uid] = now
	r.prune(now)
	return 0, true
}

// slot is the earliest start time from now that keeps reads period apart,
// and takes it. No credit builds up while reads are idle: a burst of new
// objects is spread out from the first.
func (r *ProgressReader) slot(now time.Time) time.Time {
	at := r.next
	if at.Before(now) {
		at = now
	}
	r.next = at.Add(r.period)
	return at
}

// busyRetry is when an object turned away by the concurrency bound asks
// again: soon, but not in a tight loop.
func (r *ProgressReader) busyRetry() time.Duration { return max(r.Interval/10, time.Second) }

// prune forgets objects not read for a while (finished, deleted), so the
// maps hold only the running ones.
func (r *ProgressReader) prune(now time.Time) {
	if len(r.last)+len(r.reserved) < 1024 {
		return
	}
	for uid, t := range r.last {
		if now.Sub(t) > 3*r.Interval {
			delete(r.last, uid)
		}
	}
	for uid, t := range r.reserved {
		if now.Sub(t) > 3*r.Interval {
			delete(r.reserved, uid)
		}
	}
}

func (r *ProgressReader) done() { <-r.slots }

// read returns the worker's last progress line, if its log has one.
func (r *ProgressReader) read(ctx context.Context, pod *corev1.Pod) (workerv1.Progress, bool, error) {
	defer r.done()
	ctx, cancel := context.WithTimeout(ctx, progressTimeout)
	defer cancel()
	tail, err := r.Logs.Tail(ctx, pod.Namespace, pod.Name, workerContainer, progressTailLines, progressLimitBytes)
	if err != nil {
		return workerv1.Progress{}, false, err
	}
	p, ok := workerv1.LastProgress(tail)
	return p, ok, nil
}

// refreshProgress updates status.progress of a Running run from its
// worker's log when a read is due, and returns when to look again (0 when
// there is nothing to read).
func (p *Pipeline) refreshProgress(ctx context.Context, s *scope, pods []corev1.Pod, o Observation) time.Duration {
	r := p.Progress
	if r == nil || o.State != StateRunning || s.status.Phase != v1alpha1.PhaseRunning {
		return 0
	}
	pod := runningWorker(pods)
	if pod == nil {
		return 0
	}
	wait, ok := r.take(s.obj.GetUID())
	if !ok {
		return wait
	}
	prog, found, err := r.read(ctx, pod)
	if err != nil {
		// Advisory: the run goes on, and status keeps what it showed. The
		// error is the client's (status code and path), no log content.
		logf.FromContext(ctx).V(1).Info("progress not read", "pod", pod.Name, "error", err.Error())
	} else if found {
		s.status.Progress = NextProgress(s.status.Progress, prog, r.now())
	}
	return r.Interval
}

// runningWorker is the newest pod whose worker container is running: one
// whose log can hold current progress.
func runningWorker(pods []corev1.Pod) *corev1.Pod {
	if len(pods) == 0 {
		return nil
	}
	pod := newestPod(pods)
	if pod.Status.Phase != corev1.PodRunning {
		return nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == workerContainer && cs.State.Running != nil {
			return pod
		}
	}
	return nil
}

// NextProgress is status.progress after reading p at now: prev itself when
// nothing changed, so that an unchanged worker costs no status write.
func NextProgress(prev *v1alpha1.RunProgress, p workerv1.Progress, now time.Time) *v1alpha1.RunProgress {
	next := &v1alpha1.RunProgress{Step: p.Step, BytesDone: p.Done, BytesTotal: p.Total, BytesPerSecond: p.Rate}
	if prev != nil && prev.Step == next.Step && prev.BytesDone == next.BytesDone && prev.BytesTotal == next.BytesTotal && prev.BytesPerSecond == next.BytesPerSecond {
		return prev
	}
	next.ObservedAt.Time = now
	next.Summary = ProgressSummary(*next)
	return next
}

// ProgressSummary is status.progress.summary: "12.3 GiB/100 GiB (45 MiB/s)"
// with a known total, "12.3 GiB (45 MiB/s)" without, else the step.
func ProgressSummary(p v1alpha1.RunProgress) string {
	if p.BytesDone == 0 && p.BytesTotal == 0 {
		return string(p.Step)
	}
	done := humanBytes(p.BytesDone)
	if p.BytesTotal > 0 {
		done += "/" + humanBytes(p.BytesTotal)
	}
	return fmt.Sprintf("%s (%s/s)", done, humanBytes(p.BytesPerSecond))
}

// humanBytes is n in IEC units with one decimal, without a trailing ".0".
func humanBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	return s + " " + string(units[i]) + "iB"
}

// dropProgress clears status.progress once the run is not Running (or a
// new attempt started): a finished run's last bytes are not its state. A
// Claim's deliver step is the Claim's own (see ClaimDeliverStep).
func dropProgress(st, before *v1alpha1.PipelineStatus) {
	if st.Progress == nil {
		return
	}
	if st.Progress.Step == v1alpha1.StepDeliver {
		if st.Phase != v1alpha1.PhaseSucceeded {
			st.Progress = nil
		}
		return
	}
	if st.Phase != v1alpha1.PhaseRunning || st.Attempts != before.Attempts {
		st.Progress = nil
	}
}

// MarkDeliverStep sets a Claim's step to deliver while its pushed digest
// waits for Flux (on), and clears it once applied.
func MarkDeliverStep(st *v1alpha1.PipelineStatus, on bool, now time.Time) {
	delivering := st.Progress != nil && st.Progress.Step == v1alpha1.StepDeliver
	switch {
	case on && !delivering:
		st.Progress = &v1alpha1.RunProgress{Step: v1alpha1.StepDeliver, Summary: string(v1alpha1.StepDeliver)}
		st.Progress.ObservedAt.Time = now
	case !on && delivering:
		st.Progress = nil
	}
}
