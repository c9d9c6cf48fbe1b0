package controllers_test

import (
	"context"
	"fmt"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func okResult(d string) string {
	return fmt.Sprintf(`{"digest":%q,"reference":"registry.example.com/acme/tiny@%s","sourceRevision":"c0ffee","tag":"v1"}`, d, d)
}

const retryable = `{"error":{"reason":"RegistryUnavailable","message":"503 from registry","permanent":false}}`
const permanent = `{"error":{"reason":"RegistryAuthDenied","message":"401 from registry: check the push Secret","permanent":true}}`

func condition(a *v1alpha1.Artifact, t string) *metav1Condition {
	return apimeta.FindStatusCondition(a.Status.Conditions, t)
}

func eventually(t *testing.T, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(f).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
}

func TestArtifactSucceeds(t *testing.T) {
	startManager(t)
	runs := metricDelta(t, "packline_runs_total", map[string]string{"kind": "Artifact", "result": "succeeded"})
	durations := metricDelta(t, "packline_run_duration_seconds", map[string]string{"kind": "Artifact", "result": "succeeded"})
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "tiny"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())

	job := waitJob(t, ns, key.Name, 1, 1)
	eventually(t, func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "tiny-workspace"}, pvc)).To(Succeed())
	})
	pod := runPod(t, job)
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseRunning)) })
	const imageDigest = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	res := strings.TrimSuffix(okResult(digest), "}") + `,"imageDigest":"` + imageDigest + `","imageReference":"registry.example.com/acme/tiny@` + imageDigest + `"}`
	finishPod(t, job, pod, 0, res)

	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(a.Status.Digest).To(Equal(digest))
		g.Expect(a.Status.Reference).To(Equal("registry.example.com/acme/tiny@" + digest))
		g.Expect(a.Status.ImageDigest).To(Equal(imageDigest))
		g.Expect(a.Status.ImageReference).To(Equal("registry.example.com/acme/tiny@" + imageDigest))
		g.Expect(a.Status.SourceRevision).To(Equal("c0ffee"))
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		g.Expect(a.Status.Attempts).To(Equal(int32(1)))
		g.Expect(a.Status.JobRef.Name).To(Equal(job.Name))
		g.Expect(a.Status.CompletionTime).NotTo(BeNil())
		g.Expect(condition(a, v1alpha1.ConditionReady).Status).To(BeEquivalentTo("True"))
		g.Expect(condition(a, v1alpha1.ConditionReconciling)).To(BeNil())
		g.Expect(condition(a, v1alpha1.ConditionStalled)).To(BeNil())
	})
	// Reclaim policy Delete (the default) frees the workspace after success.
	eventually(t, func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "tiny-workspace"}, pvc)
		g.Expect(apierrors.IsNotFound(err) || !pvc.DeletionTimestamp.IsZero()).To(BeTrue(), "workspace not freed")
	})
	// An event for each phase change.
	eventually(t, func(g Gomega) {
		var evs eventsList
		g.Expect(env.Client.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
		actions := map[string]bool{}
		for _, e := range evs.Items {
			actions[e.Action] = true
		}
		g.Expect(actions).To(HaveKey("Pending"))
		g.Expect(actions).To(HaveKey("Running"))
		g.Expect(actions).To(HaveKey("Succeeded"))
	})
	// At least this run's: other tests' leftovers may move them too.
	g := NewWithT(t)
	g.Expect(runs()).To(BeNumerically(">=", 1))
	g.Expect(durations()).To(BeNumerically(">=", 1))
}

func TestArtifactInvalidResultFailsOnce(t *testing.T) {
	for name, msg := range map[string]string{"missing": "", "malformed": "pushed sha256:abc to registry"} {
		t.Run(name, func(t *testing.T) {
			startManager(t)
			ns := newNamespace(t)
			key := client.ObjectKey{Namespace: ns, Name: "bad-" + name}
			create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
			runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, msg)
			eventually(t, func(g Gomega) {
				a := getArtifact(g, key)
				g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
				g.Expect(condition(a, v1alpha1.ConditionStalled).Reason).To(Equal(pipeline.ReasonInvalidResult))
			})
			// No requeue loop: no second attempt, and status stays put.
			g := NewWithT(t)
			g.Consistently(func(g Gomega) {
				g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(1))
				g.Expect(getArtifact(g, key).Status.Attempts).To(Equal(int32(1)))
			}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		})
	}
}

// TestArtifactRetriesThenStalls steps the manager's clock through the
// backoff: each failed attempt is Retrying, with its next attempt due one
// backoff later, and no new Job starts until the clock gets there.
func TestArtifactRetriesThenStalls(t *testing.T) {
	// Whole seconds: status times are stored with second precision.
	clock := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	startManager(t, func(c *pipeline.Config) {
		c.Now, c.BackoffBase, c.BackoffCap = clock.Now, time.Second, 2*time.Second
	})
	retries := metricDelta(t, "packline_retries_total", map[string]string{"kind": "Artifact"})
	failedRuns := metricDelta(t, "packline_runs_total", map[string]string{"kind": "Artifact", "result": "failed"})
	durations := metricDelta(t, "packline_run_duration_seconds", map[string]string{"kind": "Artifact", "result": "failed"})
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "flaky"}
	create(t, wrappers.MakeArtifact(key.Name, ns).RetryLimit(2).Obj())

	g := NewWithT(t)
	// base·2^(attempt-1), capped: the retries of attempts 1 and 2.
	for i, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		attempt := i + 1
		runJob(t, waitJob(t, ns, key.Name, 1, attempt), 1, retryable)
		due := clock.Now().Add(backoff)
		eventually(t, func(g Gomega) {
			a := getArtifact(g, key)
			g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseRetrying))
			g.Expect(a.Status.Attempts).To(Equal(int32(attempt)))
			g.Expect(a.Status.NextAttemptTime).NotTo(BeNil())
			g.Expect(a.Status.NextAttemptTime.Time).To(BeTemporally("==", due))
			g.Expect(condition(a, v1alpha1.ConditionReconciling).Message).To(ContainSubstring(
				fmt.Sprintf("attempt %d failed: 503 from registry; retrying in %s", attempt, backoff)))
		})
		// The clock has not moved, so the backoff holds the next attempt
		// past the manager's own requeue (after backoff, in real time).
		g.Consistently(func(g Gomega) {
			g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(attempt))
		}).WithTimeout(backoff + 500*time.Millisecond).WithPolling(100 * time.Millisecond).Should(Succeed())
		clock.Step(backoff)
	}
	runJob(t, waitJob(t, ns, key.Name, 1, 3), 1, retryable)
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		g.Expect(a.Status.Attempts).To(Equal(int32(3)))
		g.Expect(a.Status.NextAttemptTime).To(BeNil())
		st := condition(a, v1alpha1.ConditionStalled)
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Reason).To(Equal("RegistryUnavailable"))
		g.Expect(st.Message).To(ContainSubstring("retryLimit is 2"))
	})
	g.Consistently(func(g Gomega) {
		g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(3))
	}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	// At least this run's: other tests' leftovers may move them too.
	g.Expect(retries()).To(BeNumerically(">=", 2))
	g.Expect(failedRuns()).To(BeNumerically(">=", 1))
	g.Expect(durations()).To(BeNumerically(">=", 1))
}

func TestArtifactPermanentFailureStallsAtOnce(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "denied"}
	a := wrappers.MakeArtifact(key.Name, ns).RetryLimit(5).PushSecret("team-registry").Obj()
	create(t, a)
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 1, permanent)
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		st := condition(a, v1alpha1.ConditionStalled)
		g.Expect(st.Reason).To(Equal("RegistryAuthDenied"))
		g.Expect(st.Message).To(ContainSubstring("check the push Secret"))
		// The worker cannot know the Secret's name; the controller adds it.
		g.Expect(st.Message).To(ContainSubstring(`Secret "team-registry" (spec.target.pushSecretRef)`))
	})
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(1))
	}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// TestSpecEditRestarts edits the spec while Running, after Succeeded and
// after Failed: each time the old Job goes and a Job of the new generation
// runs to a new status.
func TestSpecEditRestarts(t *testing.T) {
	setups := map[string]func(t *testing.T, job *batchv1.Job){
		"while running":   func(t *testing.T, job *batchv1.Job) { runPod(t, job) },
		"after succeeded": func(t *testing.T, job *batchv1.Job) { runJob(t, job, 0, okResult(digest)) },
		"after failed":    func(t *testing.T, job *batchv1.Job) { runJob(t, job, 1, permanent) },
	}
	wantPhase := map[string]v1alpha1.Phase{"while running": v1alpha1.PhaseRunning, "after succeeded": v1alpha1.PhaseSucceeded, "after failed": v1alpha1.PhaseFailed}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			startManager(t)
			ns := newNamespace(t)
			key := client.ObjectKey{Namespace: ns, Name: "edit"}
			create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
			old := waitJob(t, ns, key.Name, 1, 1)
			setup(t, old)
			eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(wantPhase[name])) })

			eventually(t, func(g Gomega) {
				a := getArtifact(g, key)
				a.Spec.Target.Tag = "v2"
				g.Expect(env.Client.Update(context.Background(), a)).To(Succeed())
			})
			job := waitJob(t, ns, key.Name, 2, 1)
			eventually(t, func(g Gomega) {
				err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(old), &batchv1.Job{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "old Job %s still there", old.Name)
				a := getArtifact(g, key)
				g.Expect(a.Status.ObservedGeneration).To(Equal(int64(2)))
				g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhasePending))
				g.Expect(a.Status.Digest).To(BeEmpty())
				g.Expect(a.Status.Attempts).To(Equal(int32(1)))
			})
			d2 := strings.Replace(digest, "0123", "4567", 1)
			runJob(t, job, 0, okResult(d2))
			eventually(t, func(g Gomega) {
				a := getArtifact(g, key)
				g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
				g.Expect(a.Status.Digest).To(Equal(d2))
			})
		})
	}
}

// TestManagerRestartMidRun: a new manager against the same apiserver
// never creates a second Job for the same (generation, attempt), even when
// the status that recorded the Job was lost.
func TestManagerRestartMidRun(t *testing.T) {
	stop := startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "restart"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	job := waitJob(t, ns, key.Name, 1, 1)
	pod := runPod(t, job)
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseRunning)) })
	stop()

	// Lose the status, as if the manager died between creating the Job
	// and patching status.
	a := getArtifact(NewWithT(t), key)
	a.Status = v1alpha1.PipelineStatus{}
	if err := env.Client.Status().Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	startManager(t)
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseRunning))
		g.Expect(a.Status.JobRef.Name).To(Equal(job.Name))
	})
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(1))
	}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	finishPod(t, job, pod, 0, okResult(digest))
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })
}

func TestLongName(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	name := strings.Repeat("m", 63)
	key := client.ObjectKey{Namespace: ns, Name: name}
	create(t, wrappers.MakeArtifact(name, ns).Obj())
	job := waitJob(t, ns, name, 1, 1)
	if len(job.Name) > 63 {
		t.Fatalf("Job name %q is %d characters", job.Name, len(job.Name))
	}
	runJob(t, job, 0, okResult(digest))
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })
}

func TestQueuedJob(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "queued"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Queue("gpu").Obj())
	job := waitJob(t, ns, key.Name, 1, 1)
	if !*job.Spec.Suspend || job.Labels[pipeline.QueueLabel] != "gpu" {
		t.Fatalf("queued Job: suspend=%v labels=%v", *job.Spec.Suspend, job.Labels)
	}
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseQueued)) })

	// Kueue admits the workload by unsuspending the Job.
	eventually(t, func(g Gomega) {
		j := &batchv1.Job{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), j)).To(Succeed())
		j.Spec.Suspend = ptr.To(false)
		g.Expect(env.Client.Update(context.Background(), j)).To(Succeed())
		job = j
	})
	runPod(t, job)
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseRunning)) })
	// The controller never edited the Job after Kueue took it.
	j := &batchv1.Job{}
	NewWithT(t).Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), j)).To(Succeed())
	if *j.Spec.Suspend || j.Generation != job.Generation {
		t.Fatalf("Job spec changed: suspend=%v generation %d→%d", *j.Spec.Suspend, job.Generation, j.Generation)
	}
}

func TestJobDeletedByTTLKeepsStatus(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "ttl"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	job := waitJob(t, ns, key.Name, 1, 1)
	runJob(t, job, 0, okResult(digest))
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })

	// The TTL controller deletes the Job and its pods.
	if err := env.Client.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	NewWithT(t).Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	for i := range pods.Items {
		NewWithT(t).Expect(env.Client.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0))).To(Succeed())
	}
	NewWithT(t).Consistently(func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(a.Status.Digest).To(Equal(digest))
		g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty())
	}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// TestWorkerServiceAccountMissing: with --worker-service-account set, a
// namespace without that account says so instead of creating Jobs whose
// pods could never be admitted; creating the account unblocks it.
func TestWorkerServiceAccountMissing(t *testing.T) {
	startManager(t, func(c *pipeline.Config) { c.WorkerServiceAccount = "packline-worker" })
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "no-sa"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhasePending))
		ready := condition(a, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(pipeline.ReasonServiceAccountMissing))
		g.Expect(ready.Message).To(ContainSubstring(`ServiceAccount "packline-worker"`))
		g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty())
	})
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "packline-worker", Namespace: ns}})
	job := waitJob(t, ns, key.Name, 1, 1)
	if job.Spec.Template.Spec.ServiceAccountName != "packline-worker" {
		t.Fatalf("serviceAccountName = %q", job.Spec.Template.Spec.ServiceAccountName)
	}
}

// A result message carrying credentials (a URL with userinfo and a
// pre-signed query, a bearer token) never reaches status or events, even
// if a worker failed to redact it.
func TestCredentialsNeverReachStatusOrEvents(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "leaky"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	const (
		pass = "Pa55wordMARKER1"
		sig  = "SigMARKER2"
		tok  = "TokenMARKER3abcdef"
	)
	leak := `{"error":{"reason":"SourceUnavailable","message":"GET https://bob:` + pass + `@hub.example.com/x?X-Amz-Signature=` + sig + `: 500; Authorization: Bearer ` + tok + `","permanent":true}}`
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 1, leak)
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		st := condition(a, v1alpha1.ConditionStalled)
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Message).To(ContainSubstring("hub.example.com/x"), "the message still says what failed")
		var events eventsv1.EventList
		g.Expect(env.Client.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).NotTo(BeEmpty())
		var all []string
		for _, c := range a.Status.Conditions {
			all = append(all, c.Message)
		}
		for _, e := range events.Items {
			all = append(all, e.Note)
		}
		for _, text := range all {
			for _, marker := range []string{pass, sig, tok} {
				g.Expect(text).NotTo(ContainSubstring(marker))
			}
		}
	})
}

// A pod the kubelet cannot start for a missing Secret is reported within
// seconds, naming the Secret and the field; when the Secret appears and the
// pod starts, the run goes on with no edit.
func TestMissingSecretReported(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "nosecret"}
	a := wrappers.MakeArtifact(key.Name, ns).PushSecret("team-push").Obj()
	create(t, a)
	job := waitJob(t, ns, key.Name, 1, 1)
	ctx := context.Background()
	pod := wrappers.MakePod(job.Name+"-x", ns, job.Name).Labels(job.Spec.Template.Labels).ControlledBy(job).Obj()
	pod.Spec = *job.Spec.Template.Spec.DeepCopy()
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = wrappers.MakePod("", "", "").Waiting(pipeline.ReasonConfigError, `secret "team-push" not found`).Status
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		ready := condition(getArtifact(g, key), v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(pipeline.ReasonConfigError))
		g.Expect(ready.Message).To(ContainSubstring(`secret "team-push" not found`))
		g.Expect(ready.Message).To(ContainSubstring(`Secret "team-push" (spec.target.pushSecretRef)`))
		g.Expect(ready.Message).To(ContainSubstring("goes on by itself"))
	})
	// The Secret appears; the kubelet starts the container.
	eventually(t, func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), p)).To(Succeed())
		p.Status = wrappers.MakePod("", "", "").Running().Status
		g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	})
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseRunning)) })
}

// A deleted and re-created Artifact of the same name never adopts its
// predecessor's Job (same deterministic name): it waits for the garbage
// collector, then runs its own.
func TestRecreatedArtifactDoesNotAdoptOldJob(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "again"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	old := waitJob(t, ns, key.Name, 1, 1)
	ctx := context.Background()
	first := &v1alpha1.Artifact{}
	if err := env.Client.Get(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	// envtest runs no garbage collector, so the old Job stays, as it does
	// on a cluster until the collector gets to it.
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, &v1alpha1.Artifact{})).NotTo(Succeed())
	})
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.UID).NotTo(Equal(first.UID))
		ready := condition(a, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Message).To(ContainSubstring("belongs to an earlier Artifact of the same name"))
		g.Expect(a.Status.JobRef).To(BeNil())
	})
	// The collector removes the old Job and workspace (envtest has no
	// pvc-protection controller either: drop its finalizer); the new
	// Artifact runs its own.
	if err := env.Client.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	oldWS := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pipeline.WorkspaceName(key.Name)}, oldWS); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(oldWS, first) {
		t.Fatalf("the workspace is not the first Artifact's: %v", oldWS.OwnerReferences)
	}
	if err := env.Client.Delete(ctx, oldWS); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(oldWS), pvc)
		if apierrors.IsNotFound(err) || pvc.UID != oldWS.UID {
			return
		}
		pvc.Finalizers = nil
		g.Expect(env.Client.Update(ctx, pvc)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		jobs := jobsOf(g, ns, key.Name)
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobs[0].Labels[pipeline.LabelOwnerUID]).To(Equal(string(getArtifact(g, key).UID)))
	})
}

// A permanent failure (a wrong Secret) needs no spec edit once fixed: the
// packline.dev/requestedAt annotation starts one more attempt.
func TestRerunAnnotation(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "rerun"}
	a := wrappers.MakeArtifact(key.Name, ns).PushSecret("team-registry").Obj()
	create(t, a)
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 1, permanent)
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
		g.Expect(condition(a, v1alpha1.ConditionStalled).Message).To(ContainSubstring("packline.dev/requestedAt"))
	})
	annotate := func(v string) {
		eventually(t, func(g Gomega) {
			a := getArtifact(g, key)
			if a.Annotations == nil {
				a.Annotations = map[string]string{}
			}
			a.Annotations[v1alpha1.AnnotationRequestedAt] = v
			g.Expect(env.Client.Update(context.Background(), a)).To(Succeed())
		})
	}
	annotate("1")
	runJob(t, waitJob(t, ns, key.Name, 1, 2), 0, okResult(digest))
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(a.Status.Attempts).To(Equal(int32(2)))
		g.Expect(a.Status.LastHandledRequestedAt).To(Equal("1"))
	})
	// The same value again, or a new one on a Succeeded resource, starts nothing.
	annotate("2")
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.LastHandledRequestedAt).To(Equal("2")) })
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(jobsOf(g, ns, key.Name)).To(HaveLen(2))
		g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// A workspace the API server refuses (here a ResourceQuota) shows in
// status with the API server's message, not only in the manager's log; when
// the quota allows it, the run goes on.
func TestWorkspaceRejectedShowsInStatus(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pvcs", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("0")}}}
	create(t, quota)
	// No quota controller runs in envtest: publish its usage as it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("0")}}
	if err := env.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: "quota"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	eventually(t, func(g Gomega) {
		ready := condition(getArtifact(g, key), v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(pipeline.ReasonWorkspaceRejected))
		g.Expect(ready.Message).To(ContainSubstring("exceeded quota"))
		g.Expect(ready.Message).To(ContainSubstring("quota-workspace"))
	})
	if err := env.Client.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ns, key.Name, 1, 1)
}
