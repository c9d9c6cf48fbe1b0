package multikueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/sandbox"
)

// The worker cluster's node stops while a dispatched run is mid-download:
// the user sees the attempt fail and a new one wait on the worker
// cluster; once the node is back, the Artifact is Ready with one pushed
// manifest under one tag.
func TestMultiKueueWorkerNodeStopped(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := watchWorker(t, ns)
	release := sb.HF.Hold()
	defer release()
	a := newArtifact(ns, "model").Obj()
	if err := sb.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	trail := watchStatus(t, a)
	running := workerPod{Node: sandbox.WorkerNodeName, Command: "artifact", Phase: corev1.PodRunning}
	waitFor(t, func(g Gomega) { g.Expect(w.pods()).To(ContainElement(running)) }).Should(Succeed())
	waitFor(t, func(g Gomega) {
		g.Expect(trail.seen()).To(ContainElement(statusLine{v1alpha1.PhaseRunning, "Running", "running on a worker cluster (spec.managedBy kueue.x-k8s.io/multikueue)"}))
	}).Should(Succeed())

	sb.Worker().StopNode()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = sb.Worker().StartNode()
		}
	})
	// The stopped node's pod is reported failed; the attempt's Job fails on
	// the worker cluster, MultiKueue mirrors that, and packline says so and
	// starts attempt 2.
	waitFor(t, func(g Gomega) {
		g.Expect(trail.seen()).To(ContainElement(SatisfyAll(
			HaveField("Phase", v1alpha1.PhaseRetrying),
			HaveField("Reason", "FailedOnWorkerCluster"),
			HaveField("Message", HavePrefix("attempt 1 failed: Job failed on a worker cluster (spec.managedBy kueue.x-k8s.io/multikueue): BackoffLimitExceeded: Job has reached the specified backoff limit; the worker pod, with its exit and result, is on that cluster only; retrying in ")))))
	}).Should(Succeed())
	// Attempt 2 is admitted and dispatched; on the worker cluster its pod
	// waits, as no node runs it: the user is told it is not running.
	waitFor(t, func(g Gomega) {
		o := &v1alpha1.Artifact{}
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(a), o)).To(Succeed())
		c := ready(&o.Status)
		g.Expect(c).NotTo(BeNil())
		g.Expect(statusLine{o.Status.Phase, c.Reason, c.Message}).To(Equal(statusLine{v1alpha1.PhasePending, "Dispatched",
			"handed to kueue.x-k8s.io/multikueue; on the worker cluster its pod is not running (Job status: 1 active, 0 ready): not started yet, or its node is down"}))
		g.Expect(o.Status.Attempts).To(Equal(int32(2)))
	}).Should(Succeed())
	for _, l := range trail.seen() {
		t.Logf("status while the node is down: %s", l)
	}
	t.Logf("worker cluster Jobs: %v", w.jobs())
	events(t, ns)

	release()
	if err := sb.Worker().StartNode(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	got := waitReady(t, a)
	for _, l := range trail.seen() {
		t.Logf("status: %s", l)
	}
	g := NewWithT(t)
	g.Expect(got.Status.Attempts).To(Equal(int32(2)))
	tags, manifests := pushed(t, got)
	g.Expect(tags).To(ConsistOf(wantTags(got)))
	g.Expect(manifests).To(ConsistOf(wantManifests(got)))
	var pvcs corev1.PersistentVolumeClaimList
	g.Expect(sb.Client.List(ctx, &pvcs, client.InNamespace(ns))).To(Succeed())
	g.Expect(pvcs.Items).To(BeEmpty())
}

// statusLine is what `kubectl get` and the Ready condition say.
type statusLine struct {
	Phase           v1alpha1.Phase
	Reason, Message string
}

func (l statusLine) String() string { return fmt.Sprintf("%s %s: %s", l.Phase, l.Reason, l.Message) }

// statusTrail records every distinct status line an Artifact showed.
type statusTrail struct {
	mu    sync.Mutex
	lines []statusLine
}

// watchStatus samples a's status every 50ms until the test ends.
func watchStatus(t testing.TB, a *v1alpha1.Artifact) *statusTrail {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr := &statusTrail{}
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			o := &v1alpha1.Artifact{}
			if err := sb.Client.Get(ctx, client.ObjectKeyFromObject(a), o); err != nil {
				continue
			}
			line := statusLine{Phase: o.Status.Phase}
			if c := ready(&o.Status); c != nil {
				line.Reason, line.Message = c.Reason, c.Message
			}
			tr.mu.Lock()
			if n := len(tr.lines); n == 0 || tr.lines[n-1] != line {
				tr.lines = append(tr.lines, line)
			}
			tr.mu.Unlock()
		}
	}()
	return tr
}

func (tr *statusTrail) seen() []statusLine {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]statusLine(nil), tr.lines...)
}

// events logs the management cluster's events in ns (what `kubectl
// describe` shows).
func events(t testing.TB, ns string) {
	var l corev1.EventList
	if err := sb.Client.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Items {
		t.Logf("event %s/%s %s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
	}
}
