package controllers_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/packline/packline/test/wrappers"
)

// A manager stopped while its queue is full of ready work stops at once.
// controller-runtime's priority queue could block for good at shutdown
// (issue #3538, fixed in v0.25.2): a ready item handed to a worker that had
// already left kept the queue's locks, and every worker then finishing a
// reconcile hung in Queue.Done until the 30 s grace period ran out. Every
// start enqueues all the Artifacts at once (the initial list); each round
// stops the manager at a different point of working through them.
func TestManagerStopsWithAFullQueue(t *testing.T) {
	ns := newNamespace(t)
	for i := range 200 {
		create(t, wrappers.MakeArtifact(fmt.Sprintf("a%03d", i), ns).Obj())
	}
	const rounds, limit = 40, 10 * time.Second
	for round := range rounds {
		reconciles := metricDelta(t, "controller_runtime_reconcile_total", map[string]string{"controller": "artifact"})
		stop := startManager(t)
		at := float64(1 + round%5*20)
		NewWithT(t).Eventually(reconciles).WithTimeout(20*time.Second).WithPolling(5*time.Millisecond).
			Should(BeNumerically(">=", at), "round %d: Artifact reconciles under way", round)
		began := time.Now()
		stop()
		if took := time.Since(began); took > limit {
			t.Fatalf("round %d: the manager took %s to stop, want under %s", round, took.Round(time.Millisecond), limit)
		}
	}
}
