package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// With a short --job-ttl, the real TTL-after-finished controller deletes the
// finished Job; the Artifact keeps its terminal status and digest.
func TestFinishedJobRemovedByTTLKeepsStatus(t *testing.T) {
	sb.StopManager()
	g := NewWithT(t)
	g.Expect(sb.StartManager("--job-ttl=2s")).To(Succeed())
	defer func() {
		sb.StopManager()
		g.Expect(sb.StartManager()).To(Succeed())
	}()
	ns := newNamespace(t)
	a := newArtifact(ns, "ttl", "packline/tiny-model").Obj()
	create(t, a)
	waitReady(t, a, a.GetPipelineStatus)
	digest := a.Status.Digest
	g.Expect(ownedJobs(g, ns, a.Name)).To(HaveLen(1))

	waitFor(t, func(g Gomega) { g.Expect(ownedJobs(g, ns, a.Name)).To(BeEmpty()) }).Should(Succeed())
	// The manager saw the Job go; the status must not regress.
	NewWithT(t).Consistently(func(g Gomega) {
		got := &v1alpha1.Artifact{}
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(a), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(got.Status.Digest).To(Equal(digest))
		g.Expect(isTrue(&got.Status, "Ready")).To(BeTrue())
	}).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}
