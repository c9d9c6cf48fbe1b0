package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager is killed while its Job runs, the Job finishes while no
// manager is up, and a new manager picks up the result: still exactly one
// Job per (generation, attempt), and the Artifact becomes Ready.
func TestManagerKilledMidRun(t *testing.T) {
	release := sb.HF.Hold()
	defer release()
	ns := newNamespace(t)
	a := newArtifact(ns, "restart", "packline/tiny-model").Obj()
	create(t, a)
	waitRunningPod(t, ns, a.Name)

	sb.KillManager()
	restarted := false
	defer func() {
		if !restarted {
			_ = sb.StartManager()
		}
	}()
	release()
	// The real Job controller completes the Job with no manager running.
	waitFor(t, func(g Gomega) {
		jobs := ownedJobs(g, ns, a.Name)
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobComplete(&jobs[0])).To(BeTrue())
	}).Should(Succeed())

	NewWithT(t).Expect(sb.StartManager()).To(Succeed())
	restarted = true
	waitReady(t, a, a.GetPipelineStatus)

	g := NewWithT(t)
	g.Expect(a.Status.Attempts).To(Equal(int32(1)))
	var jobs batchv1.JobList
	g.Expect(sb.Client.List(context.Background(), &jobs, client.InNamespace(ns))).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "exactly one Job for generation 1, attempt 1")
	g.Expect(jobs.Items[0].Labels).To(HaveKeyWithValue("packline.dev/generation", "1"))
	g.Expect(jobs.Items[0].Labels).To(HaveKeyWithValue("packline.dev/attempt", "1"))
}
