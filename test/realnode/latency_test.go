package realnode

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/sandbox"
)

// latency is one tiny Artifact's run, timed by a 20 ms poll from the test:
// apply → Ready, and its worker pod's start (pod first seen → its container
// running or done).
type latency struct{ ready, podStart time.Duration }

func measure(t *testing.T, s *sandbox.Sandbox, ns, name string) latency {
	t.Helper()
	a := newArtifact(s, ns, name).Obj()
	ctx := context.Background()
	start := time.Now()
	if err := s.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	var l latency
	var podSeen time.Time
	deadline := start.Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if l.podStart == 0 {
			var pods corev1.PodList
			if err := s.Client.List(ctx, &pods, client.InNamespace(ns)); err == nil {
				for _, p := range pods.Items {
					if p.Labels[pipeline.LabelOwnerName] != name {
						continue
					}
					if podSeen.IsZero() {
						podSeen = time.Now()
					}
					for _, cs := range p.Status.ContainerStatuses {
						if cs.State.Running != nil || cs.State.Terminated != nil {
							l.podStart = time.Since(podSeen)
						}
					}
				}
			}
		}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err == nil && isTrue(&a.Status, "Ready") && a.Status.ObservedGeneration == a.Generation {
			l.ready = time.Since(start)
			return l
		}
		if isTrue(&a.Status, "Stalled") {
			t.Fatalf("%s stalled: %+v", name, condition(&a.Status, "Stalled"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not Ready after 3m (logs in %s)", name, s.Logs())
	return l
}

func medians(ls []latency) latency {
	pick := func(f func(latency) time.Duration) time.Duration {
		d := make([]time.Duration, len(ls))
		for i, l := range ls {
			d[i] = f(l)
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	return latency{ready: pick(func(l latency) time.Duration { return l.ready }), podStart: pick(func(l latency) time.Duration { return l.podStart })}
}

// The same tiny Artifact, three times one after another, on the real node
// and then on a process-node sandbox started in this run from the same
// binaries: the figures go to the test log side by side.
func TestApplyToReadyRealVersusProcessNode(t *testing.T) {
	requireNode(t)
	const runs = 3
	run := func(s *sandbox.Sandbox) latency {
		ns := newNamespace(t, s, nil)
		var ls []latency
		for i := range runs {
			l := measure(t, s, ns, fmt.Sprintf("tiny-%d", i))
			t.Logf("%s: apply→Ready %s, pod start %s", s.NodeName(), l.ready.Round(time.Millisecond), l.podStart.Round(time.Millisecond))
			ls = append(ls, l)
		}
		return medians(ls)
	}
	real := run(sb)

	o := opts
	o.Node, o.WorkerImage = "", ""
	var err error
	if o.Dir, err = os.MkdirTemp("", "packline-realnode-process-"); err != nil {
		t.Fatal(err)
	}
	proc, err := sandbox.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("starting the process-node sandbox: %v", err)
	}
	defer func() {
		proc.Stop()
		if !t.Failed() {
			_ = os.RemoveAll(o.Dir)
		}
	}()
	process := run(proc)
	t.Logf("median of %d tiny Artifacts: apply→Ready real node %s vs process node %s (×%.1f); pod start real %s vs process %s",
		runs, real.ready.Round(time.Millisecond), process.ready.Round(time.Millisecond),
		float64(real.ready)/float64(process.ready), real.podStart.Round(time.Millisecond), process.podStart.Round(time.Millisecond))
}
