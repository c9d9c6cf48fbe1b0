package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
)

// Chaos schedule: the manager is killed with SIGKILL every 2–5 s for a
// minute while the runs go on, then left running until every Artifact
// converges.
const (
	chaosArtifacts = 100
	chaosDuration  = time.Minute
	chaosMinGap    = 2 * time.Second
	chaosMaxGap    = 5 * time.Second
	// chaosSeedEnv replays a schedule: the test logs the seed it used.
	chaosSeedEnv = "PACKLINE_CHAOS_SEED"
	// chaosHold is how long into the chaos the downloads are held: every
	// run is in flight during the first kills, the Jobs finish while the
	// manager keeps dying, and on a 2-core machine some are still running
	// at the last kill, so the convergence time measures a catch-up.
	chaosHold = chaosDuration * 3 / 4
)

// TestChaosManagerKilledRepeatedly runs 100 Artifacts while the manager is
// killed with SIGKILL at random 2–5 s intervals for a minute (downloads
// held for the first 45–50 s, see chaosHold). Then all 100 converge to Ready;
// the cluster never held more than one Job per (owner, generation,
// attempt) nor more than one workspace per owner (an informer records every
// Job and PVC ever created, so a duplicate that was later deleted still
// counts; the suite's Job TTL is the default hour); and once the Artifacts
// are deleted the garbage collector leaves no Job, pod or PVC behind.
func TestChaosManagerKilledRepeatedly(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test: about two minutes of manager kills and convergence")
	}
	began := time.Now()
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	t.Logf("chaos: seed %d (replay with %s=%d)", seed, chaosSeedEnv, seed)

	ns := newNamespace(t)
	seen := recordChildren(t, ns)
	release := sb.HF.Hold()
	defer release()
	objs := make([]client.Object, chaosArtifacts)
	for i := range objs {
		objs[i] = newArtifact(ns, fmt.Sprintf("chaos-%03d", i), "packline/tiny-model").Obj()
	}
	// Created while the manager is up: its admission webhook must answer.
	createAll(t, objs, 8)

	kills, lastKill, uptime := killRepeatedly(t, rng, release)
	readyAtLastKill := countReady(t, ns)

	converged := waitAllReady(t, ns)
	convergence := converged.Sub(lastKill)
	t.Logf("chaos: %d SIGKILLs in %s (mean uptime between kills %s); %d/%d Ready at the last kill; converged %s after it",
		kills, chaosDuration, (uptime / time.Duration(kills)).Round(time.Millisecond), readyAtLastKill, chaosArtifacts, convergence.Round(time.Millisecond))

	assertOneJobPerAttempt(t, ns, seen)

	for _, o := range objs {
		if err := sb.Client.Delete(context.Background(), o); err != nil {
			t.Fatalf("delete %s: %v", o.GetName(), err)
		}
	}
	waitNothingLeft(t, ns)
	t.Logf("chaos: wall time %s", time.Since(began).Round(time.Second))
}

// chaosSeed is PACKLINE_CHAOS_SEED when set, else the clock.
func chaosSeed(t *testing.T) uint64 {
	if s := os.Getenv(chaosSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", chaosSeedEnv, s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// killRepeatedly SIGKILLs the manager at random intervals of 2–5 s for
// chaosDuration, restarting it after each kill as a crashed pod would be.
// An interval counts from the previous kill, so a slow restart shortens
// the next uptime (to nothing, if it took longer than the interval). The
// held downloads are released at the first kill after chaosHold. It leaves
// the manager running and returns the number of kills, the time of the
// last one, and the manager's total uptime between kills. The convergence
// time counted from the last kill includes that restart. The sleeps are the
// chaos schedule itself, not synchronisation.
func killRepeatedly(t *testing.T, rng *rand.Rand, release func()) (kills int, last time.Time, uptime time.Duration) {
	down := false
	defer func() {
		// The tests after this one need a manager, even if this one failed.
		if down {
			_ = sb.StartManager()
		}
	}()
	start := time.Now()
	up := time.Now()
	next := start.Add(randomGap(rng))
	for next.Before(start.Add(chaosDuration)) {
		<-time.After(time.Until(next)) // the schedule: kill at next
		if time.Since(start) >= chaosHold {
			release()
		}
		uptime += time.Since(up)
		sb.KillManager()
		down, last = true, time.Now()
		kills++
		if err := sb.StartManager(); err != nil {
			t.Fatalf("restarting the manager after kill %d: %v", kills, err)
		}
		down, up = false, time.Now()
		next = last.Add(randomGap(rng))
	}
	release()
	return kills, last, uptime
}

func randomGap(rng *rand.Rand) time.Duration {
	return chaosMinGap + time.Duration(rng.Int64N(int64(chaosMaxGap-chaosMinGap)))
}

// children records, from an informer started before any Artifact exists,
// the uid of every Job and workspace PVC the namespace ever held.
type children struct {
	mu sync.Mutex
	// jobs: "owner-uid g<generation> a<attempt>" → Job uids and names.
	jobs map[string]map[string]string
	// pvcs: owner uid → PVC uids.
	pvcs map[string]map[string]bool
}

func recordChildren(t *testing.T, ns string) *children {
	c := &children{jobs: map[string]map[string]string{}, pvcs: map[string]map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(sb.Kube, 0, informers.WithNamespace(ns))
	_, err := f.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		j := o.(*batchv1.Job)
		key := fmt.Sprintf("%s g%s a%s", j.Labels[pipeline.LabelOwnerUID], j.Labels[pipeline.LabelGeneration], j.Labels[pipeline.LabelAttempt])
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.jobs[key] == nil {
			c.jobs[key] = map[string]string{}
		}
		c.jobs[key][string(j.UID)] = j.Name
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		p := o.(*corev1.PersistentVolumeClaim)
		owner := p.Labels[pipeline.LabelOwnerUID]
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.pvcs[owner] == nil {
			c.pvcs[owner] = map[string]bool{}
		}
		c.pvcs[owner][string(p.UID)] = true
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	return c
}

func countReady(t *testing.T, ns string) int {
	var list v1alpha1.ArtifactList
	if err := sb.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range list.Items {
		if readyNow(&list.Items[i]) {
			n++
		}
	}
	return n
}

func readyNow(a *v1alpha1.Artifact) bool {
	return a.Status.ObservedGeneration == a.Generation && isTrue(&a.Status, "Ready")
}

// waitAllReady polls until every Artifact in ns is Ready for its
// generation and returns when that was first seen.
func waitAllReady(t *testing.T, ns string) time.Time {
	NewWithT(t).Eventually(func(g Gomega) {
		var list v1alpha1.ArtifactList
		g.Expect(sb.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(chaosArtifacts))
		var notReady []string
		for i := range list.Items {
			if a := &list.Items[i]; !readyNow(a) {
				notReady = append(notReady, fmt.Sprintf("%s (%s, attempts %d)", a.Name, a.Status.Phase, a.Status.Attempts))
			}
		}
		g.Expect(notReady).To(BeEmpty(), "not Ready")
	}).WithTimeout(5*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "logs in %s", logsHint())
	return time.Now()
}

// assertOneJobPerAttempt checks what the informer saw against the
// Artifacts' status: every attempt an Artifact made had exactly one Job,
// no Job was made for an attempt it did not make, the Jobs it has now are
// those, it had exactly one workspace, and it reports what it pushed.
func assertOneJobPerAttempt(t *testing.T, ns string, seen *children) {
	var list v1alpha1.ArtifactList
	if err := sb.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	if err := sb.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	now := map[string]int{}
	for _, j := range jobs.Items {
		now[j.Labels[pipeline.LabelOwnerUID]]++
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	var problems []string
	attempts := map[int32]int{}
	expected := map[string]bool{}
	for _, a := range list.Items {
		attempts[a.Status.Attempts]++
		uid := string(a.UID)
		for n := int32(1); n <= a.Status.Attempts; n++ {
			key := fmt.Sprintf("%s g%d a%d", uid, a.Generation, n)
			expected[key] = true
			if got := seen.jobs[key]; len(got) != 1 {
				problems = append(problems, fmt.Sprintf("%s generation %d attempt %d: %d Jobs created, want 1: %v", a.Name, a.Generation, n, len(got), sortedValues(got)))
			}
		}
		if a.Status.Digest == "" || a.Status.Reference == "" {
			problems = append(problems, fmt.Sprintf("%s: Ready without a digest and reference: %+v", a.Name, a.Status))
		}
		if now[uid] != int(a.Status.Attempts) {
			problems = append(problems, fmt.Sprintf("%s: %d Jobs exist for %d attempts", a.Name, now[uid], a.Status.Attempts))
		}
		if got := len(seen.pvcs[uid]); got != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d workspace PVCs created, want 1", a.Name, got))
		}
	}
	total := 0
	for key, uids := range seen.jobs {
		total += len(uids)
		if !expected[key] {
			problems = append(problems, fmt.Sprintf("Jobs for an attempt no Artifact made (%s): %v", key, sortedValues(uids)))
		}
	}
	t.Logf("chaos: %d Jobs created in all; Artifacts by attempts: %v", total, attempts)
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Errorf("%d problems, the first %d:\n%s", len(problems), min(10, len(problems)), strings.Join(problems[:min(10, len(problems))], "\n"))
	}
}

func sortedValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// waitNothingLeft waits until the deleted Artifacts and every Job, pod and
// PVC of the namespace are gone: owner references alone must collect them.
func waitNothingLeft(t *testing.T, ns string) {
	NewWithT(t).Eventually(func(g Gomega) {
		left := map[string]int{}
		for kind, l := range map[string]client.ObjectList{
			"Artifacts": &v1alpha1.ArtifactList{}, "Jobs": &batchv1.JobList{},
			"Pods": &corev1.PodList{}, "PVCs": &corev1.PersistentVolumeClaimList{},
		} {
			g.Expect(sb.Client.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
			if n := meta.LenList(l); n > 0 {
				left[kind] = n
			}
		}
		g.Expect(left).To(BeEmpty(), "left after deleting every Artifact")
	}).WithTimeout(3*time.Minute).WithPolling(500*time.Millisecond).Should(Succeed(), "logs in %s", logsHint())
}
