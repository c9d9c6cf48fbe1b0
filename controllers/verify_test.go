package controllers_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

const tagMoved = `{"error":{"reason":"TagMoved","message":"tag v1 of registry.example.com/acme/tiny now points at sha256:ffff, not the pushed one","permanent":true}}`

// TestVerifyInterval: with spec.verifyInterval, a succeeded Artifact gets
// one verification Job per interval (on the manager's clock); a moved tag
// shows as Verified=False TagMoved, and a later check that passes as
// Verified=True. The run itself is not repeated.
func TestVerifyInterval(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	startManager(t, func(c *pipeline.Config) { c.Now = clock.Now })
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "watched"}
	a := wrappers.MakeArtifact(key.Name, ns).Obj()
	a.Spec.VerifyInterval = &metav1.Duration{Duration: time.Minute}
	create(t, a)
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })

	check := func(seq int, exit int32, msg string, want metav1.ConditionStatus, reason string) {
		t.Helper()
		clock.Step(time.Minute + time.Second)
		poke(t, key, seq)
		var job *batchv1.Job
		eventually(t, func(g Gomega) {
			job = nil
			for _, j := range jobsOf(g, ns, key.Name) {
				if strings.HasPrefix(j.Labels[pipeline.LabelInputs], "v") && j.Labels[pipeline.LabelAttempt] == itoa(seq) {
					job = &j
				}
			}
			g.Expect(job).NotTo(BeNil(), "no verification Job %d", seq)
		})
		NewWithT(t).Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"verify"}))
		runJob(t, job, exit, msg)
		eventually(t, func(g Gomega) {
			a := getArtifact(g, key)
			c := condition(a, v1alpha1.ConditionVerified)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(want))
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(a.Status.Verifications).To(Equal(int32(seq)))
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded), "a verification is not a run")
		})
	}
	check(1, 1, tagMoved, metav1.ConditionFalse, "TagMoved")
	check(2, 0, okResult(digest), metav1.ConditionTrue, "Verified")
	runs := 0
	for _, j := range jobsOf(NewWithT(t), ns, key.Name) {
		if !strings.HasPrefix(j.Labels[pipeline.LabelInputs], "v") {
			runs++
		}
	}
	NewWithT(t).Expect(runs).To(Equal(1), "verifications started another run")
}

// poke changes an annotation, which wakes a reconcile: the fake clock
// moved, and the manager's requeue waits in real time.
func poke(t *testing.T, key client.ObjectKey, n int) {
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		if a.Annotations == nil {
			a.Annotations = map[string]string{}
		}
		a.Annotations["test.packline.dev/poke"] = itoa(n)
		g.Expect(env.Client.Update(context.Background(), a)).To(Succeed())
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestNewRunNamesThePreviousPush: a new run (here an edited tag) hands the
// worker the last pushed reference, so it re-uses those layers (issue 16's
// incremental re-import) instead of uploading them again.
func TestNewRunNamesThePreviousPush(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "retagged"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	first := waitJob(t, ns, key.Name, 1, 1)
	NewWithT(t).Expect(artifactDoc(t, first).Previous).To(BeEmpty())
	runJob(t, first, 0, okResult(digest))
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		a.Spec.Target.Tag = "v2"
		g.Expect(env.Client.Update(context.Background(), a)).To(Succeed())
	})
	NewWithT(t).Expect(artifactDoc(t, waitJob(t, ns, key.Name, 2, 1)).Previous).To(Equal([]string{"registry.example.com/acme/tiny@" + digest}))
}

func artifactDoc(t *testing.T, job *batchv1.Job) workerv1.Artifact {
	t.Helper()
	var doc workerv1.Artifact
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == workerv1.EnvSpec {
			NewWithT(t).Expect(workerv1.DecodeSpec([]byte(e.Value), &doc)).To(Succeed())
		}
	}
	return doc
}

// TestMirrorNamesTheFirstPush: a second Artifact of the same source in the
// namespace is handed the first one's pushed reference, so its worker
// mounts those layers instead of fetching and uploading them again.
func TestMirrorNamesTheFirstPush(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeArtifact("first", ns).Obj())
	runJob(t, waitJob(t, ns, "first", 1, 1), 0, okResult(digest))
	eventually(t, func(g Gomega) {
		g.Expect(getArtifact(g, client.ObjectKey{Namespace: ns, Name: "first"}).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
	})
	create(t, wrappers.MakeArtifact("mirror", ns).Repository("registry.example.com/mirror/tiny").Obj())
	create(t, wrappers.MakeArtifact("other", ns).HF("acme/other").Obj())
	g := NewWithT(t)
	g.Expect(artifactDoc(t, waitJob(t, ns, "mirror", 1, 1)).Previous).To(Equal([]string{"registry.example.com/acme/tiny@" + digest}))
	g.Expect(artifactDoc(t, waitJob(t, ns, "other", 1, 1)).Previous).To(BeEmpty(), "another source's push is not a mirror")
}
