package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

func TestProgressSummary(t *testing.T) {
	cases := []struct {
		p    v1alpha1.RunProgress
		want string
	}{
		{v1alpha1.RunProgress{Step: v1alpha1.StepRender}, "render"},
		{v1alpha1.RunProgress{Step: v1alpha1.StepDownload, BytesDone: 12*(1<<30) + 3*(1<<30)/10, BytesTotal: 100 << 30, BytesPerSecond: 45 << 20}, "12.3 GiB/100 GiB (45 MiB/s)"},
		{v1alpha1.RunProgress{Step: v1alpha1.StepDownload, BytesDone: 512, BytesPerSecond: 1536}, "512 B (1.5 KiB/s)"},
		{v1alpha1.RunProgress{Step: v1alpha1.StepDownload, BytesTotal: 1 << 20}, "0 B/1 MiB (0 B/s)"},
		{v1alpha1.RunProgress{Step: v1alpha1.StepDownload, BytesDone: workerv1.MaxProgressBytes, BytesTotal: workerv1.MaxProgressBytes, BytesPerSecond: workerv1.MaxProgressBytes}, "1 PiB/1 PiB (1 PiB/s)"},
	}
	for _, c := range cases {
		got := ProgressSummary(c.p)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("ProgressSummary(%+v) (-want +got):\n%s", c.p, diff)
		}
		if len(got) > 64 {
			t.Errorf("summary %q longer than the CRD's maxLength 64", got)
		}
	}
}

func TestNextProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(10 * time.Second)
	prev := &v1alpha1.RunProgress{Step: v1alpha1.StepDownload, BytesDone: 1024, BytesTotal: 4096, BytesPerSecond: 100,
		ObservedAt: metav1.Time{Time: t0}, Summary: "1 KiB/4 KiB (100 B/s)"}
	cases := []struct {
		name string
		prev *v1alpha1.RunProgress
		p    workerv1.Progress
		want *v1alpha1.RunProgress
	}{
		{"first", nil, workerv1.Progress{Step: workerv1.StepDownload, Done: 1024, Total: 4096, Rate: 100}, &v1alpha1.RunProgress{
			Step: v1alpha1.StepDownload, BytesDone: 1024, BytesTotal: 4096, BytesPerSecond: 100, ObservedAt: metav1.Time{Time: t1}, Summary: "1 KiB/4 KiB (100 B/s)"}},
		// Unchanged: the same object, so no status write.
		{"unchanged", prev, workerv1.Progress{Step: workerv1.StepDownload, Done: 1024, Total: 4096, Rate: 100}, prev},
		{"moved", prev, workerv1.Progress{Step: workerv1.StepDownload, Done: 2048, Total: 4096, Rate: 100}, &v1alpha1.RunProgress{
			Step: v1alpha1.StepDownload, BytesDone: 2048, BytesTotal: 4096, BytesPerSecond: 100, ObservedAt: metav1.Time{Time: t1}, Summary: "2 KiB/4 KiB (100 B/s)"}},
		{"new step", prev, workerv1.Progress{Step: workerv1.StepPush}, &v1alpha1.RunProgress{
			Step: v1alpha1.StepPush, ObservedAt: metav1.Time{Time: t1}, Summary: "push"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, NextProgress(c.prev, c.p, t1)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDropProgress(t *testing.T) {
	dl := &v1alpha1.RunProgress{Step: v1alpha1.StepDownload, BytesDone: 1}
	deliver := &v1alpha1.RunProgress{Step: v1alpha1.StepDeliver}
	cases := []struct {
		name        string
		st, before  v1alpha1.PipelineStatus
		wantCleared bool
	}{
		{"running keeps", v1alpha1.PipelineStatus{Phase: v1alpha1.PhaseRunning, Attempts: 1, Progress: dl}, v1alpha1.PipelineStatus{Attempts: 1}, false},
		{"succeeded clears", v1alpha1.PipelineStatus{Phase: v1alpha1.PhaseSucceeded, Attempts: 1, Progress: dl}, v1alpha1.PipelineStatus{Attempts: 1}, true},
		{"retrying clears", v1alpha1.PipelineStatus{Phase: v1alpha1.PhaseRetrying, Attempts: 1, Progress: dl}, v1alpha1.PipelineStatus{Attempts: 1}, true},
		{"new attempt clears", v1alpha1.PipelineStatus{Phase: v1alpha1.PhaseRunning, Attempts: 2, Progress: dl}, v1alpha1.PipelineStatus{Attempts: 1}, true},
		{"succeeded keeps deliver", v1alpha1.PipelineStatus{Phase: v1alpha1.PhaseSucceeded, Progress: deliver}, v1alpha1.PipelineStatus{}, false},
		{"new run clears deliver", v1alpha1.PipelineStatus{Phase: v1alpha1.PhasePending, Progress: deliver}, v1alpha1.PipelineStatus{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dropProgress(&c.st, &c.before)
			if got := c.st.Progress == nil; got != c.wantCleared {
				t.Errorf("cleared = %t, want %t", got, c.wantCleared)
			}
		})
	}
}

func TestMarkDeliverStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &v1alpha1.PipelineStatus{Phase: v1alpha1.PhaseSucceeded}
	MarkDeliverStep(st, true, t0)
	want := &v1alpha1.RunProgress{Step: v1alpha1.StepDeliver, ObservedAt: metav1.Time{Time: t0}, Summary: "deliver"}
	if diff := cmp.Diff(want, st.Progress); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	MarkDeliverStep(st, true, t0.Add(time.Minute))
	if diff := cmp.Diff(want, st.Progress); diff != "" {
		t.Errorf("a second mark moved observedAt (-want +got):\n%s", diff)
	}
	MarkDeliverStep(st, false, t0)
	if st.Progress != nil {
		t.Errorf("delivered Claim keeps progress %+v", st.Progress)
	}
}

// fakeLogs serves one log tail per pod and counts reads.
type fakeLogs struct {
	tails map[string]string
	err   error
	reads int
}

func (f *fakeLogs) Tail(ctx context.Context, ns, pod, container string, lines, limitBytes int64) ([]byte, error) {
	f.reads++
	if container != workerContainer || lines <= 0 || limitBytes <= 0 {
		return nil, fmt.Errorf("unbounded or wrong read: container %q lines %d bytes %d", container, lines, limitBytes)
	}
	if f.err != nil {
		return nil, f.err
	}
	return []byte(f.tails[ns+"/"+pod]), nil
}

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time            { return c.t }
func (c *clock) Step(d time.Duration)      { c.t = c.t.Add(d) }
func newClock() *clock                     { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func uidN(i int) types.UID                 { return types.UID(fmt.Sprintf("uid-%d", i)) }
func takeOK(r *ProgressReader, i int) bool { _, ok := r.take(uidN(i)); return ok }

func TestProgressReaderPerObjectInterval(t *testing.T) {
	c := newClock()
	r := NewProgressReader(&fakeLogs{}, 10*time.Second, 1000, 100)
	r.Now = c.Now
	if !takeOK(r, 1) {
		t.Fatal("first read refused")
	}
	r.done()
	wait, ok := r.take(uidN(1))
	if ok || wait != 10*time.Second {
		t.Fatalf("second read at once: ok %t wait %s, want refused for 10s", ok, wait)
	}
	c.Step(9 * time.Second)
	if wait, ok := r.take(uidN(1)); ok || wait != time.Second {
		t.Fatalf("after 9s: ok %t wait %s, want refused for 1s", ok, wait)
	}
	if !takeOK(r, 2) {
		t.Fatal("another object's read refused")
	}
	r.done()
	c.Step(time.Second)
	if !takeOK(r, 1) {
		t.Fatal("read after the interval refused")
	}
	r.done()
}

func TestProgressReaderGlobalBounds(t *testing.T) {
	c := newClock()
	// qps 5: reads start 200ms apart; 2 at once.
	r := NewProgressReader(&fakeLogs{}, 10*time.Second, 5, 2)
	r.Now = c.Now
	if !takeOK(r, 1) {
		t.Fatal("first read refused")
	}
	// The next objects get their turns, 200ms apart, and come back then.
	for i, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond} {
		if wait, ok := r.take(uidN(i + 2)); ok || wait != want {
			t.Fatalf("object %d: ok %t wait %s, want its turn in %s", i+2, ok, wait, want)
		}
	}
	// Early: the same turn, no new one.
	c.Step(100 * time.Millisecond)
	if wait, ok := r.take(uidN(2)); ok || wait != 100*time.Millisecond {
		t.Fatalf("early: ok %t wait %s, want 100ms", ok, wait)
	}
	c.Step(100 * time.Millisecond)
	if !takeOK(r, 2) {
		t.Fatal("read at its turn refused")
	}
	// Two reads in flight: the third waits for one to end, keeping its turn.
	c.Step(200 * time.Millisecond)
	if wait, ok := r.take(uidN(3)); ok || wait != time.Second {
		t.Fatalf("third in flight: ok %t wait %s, want a 1s retry", ok, wait)
	}
	r.done()
	if !takeOK(r, 3) {
		t.Fatal("read refused once a slot was free")
	}
	r.done()
	r.done()
	// Idle time builds no credit: after a minute, two new objects still
	// start 200ms apart.
	c.Step(time.Minute)
	if !takeOK(r, 10) {
		t.Fatal("read after idle refused")
	}
	r.done()
	if wait, ok := r.take(uidN(11)); ok || wait != 200*time.Millisecond {
		t.Fatalf("after idle: ok %t wait %s, want 200ms", ok, wait)
	}
}

func TestRefreshProgress(t *testing.T) {
	running := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a-g1-a1-x", Namespace: "ns"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: workerContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	line := func(done int64) string {
		return fmt.Sprintf("download: x\n%s{\"step\":\"download\",\"done\":%d,\"total\":4096,\"rate\":10}\nlayer \"evil\nname\" uploaded\n", workerv1.ProgressPrefix, done)
	}
	c := newClock()
	logs := &fakeLogs{tails: map[string]string{"ns/a-g1-a1-x": line(1024)}}
	p := &Pipeline{Progress: NewProgressReader(logs, 10*time.Second, 100, 4)}
	p.Progress.Now = c.Now
	obj := &v1alpha1.Artifact{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1"}}
	obj.Status.Phase = v1alpha1.PhaseRunning
	s := &scope{obj: obj, status: &obj.Status}
	runningObs := Observation{State: StateRunning}

	if again := p.refreshProgress(context.Background(), s, []corev1.Pod{running}, runningObs); again != 10*time.Second {
		t.Errorf("look again after %s, want 10s", again)
	}
	want := &v1alpha1.RunProgress{Step: v1alpha1.StepDownload, BytesDone: 1024, BytesTotal: 4096, BytesPerSecond: 10,
		ObservedAt: metav1.Time{Time: c.t}, Summary: "1 KiB/4 KiB (10 B/s)"}
	if diff := cmp.Diff(want, obj.Status.Progress); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	// Within the interval: no read, status unchanged, ask again later.
	logs.tails["ns/a-g1-a1-x"] = line(2048)
	c.Step(4 * time.Second)
	if again := p.refreshProgress(context.Background(), s, []corev1.Pod{running}, runningObs); again != 6*time.Second || logs.reads != 1 {
		t.Errorf("early: again %s reads %d, want 6s and 1 read", again, logs.reads)
	}
	// A failed read keeps what status showed.
	c.Step(6 * time.Second)
	logs.err = errors.New("the server could not find the requested resource")
	p.refreshProgress(context.Background(), s, []corev1.Pod{running}, runningObs)
	if diff := cmp.Diff(want, obj.Status.Progress); diff != "" {
		t.Fatalf("after a failed read (-want +got):\n%s", diff)
	}
	logs.err = nil
	c.Step(10 * time.Second)
	p.refreshProgress(context.Background(), s, []corev1.Pod{running}, runningObs)
	if got := obj.Status.Progress.BytesDone; got != 2048 {
		t.Errorf("bytesDone %d, want 2048", got)
	}

	// Not running: no read.
	reads := logs.reads
	c.Step(time.Minute)
	pending := running.DeepCopy()
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	if again := p.refreshProgress(context.Background(), s, []corev1.Pod{*pending}, Observation{State: StatePending}); again != 0 || logs.reads != reads {
		t.Errorf("pending pod: again %s, %d reads, want none", again, logs.reads-reads)
	}
	// Off: no reader.
	if again := (&Pipeline{}).refreshProgress(context.Background(), s, []corev1.Pod{running}, runningObs); again != 0 {
		t.Errorf("without a reader: again %s", again)
	}
}
