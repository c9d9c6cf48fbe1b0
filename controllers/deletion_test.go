package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/pipeline"
	. "github.com/packline/packline/test/wrappers"
)

// TestDeletionPolicyDelete: deleting an Artifact with deletionPolicy Delete
// runs a cleanup Job with the pushed reference, and lets the Artifact go
// when it finishes, successfully or not.
func TestDeletionPolicyDelete(t *testing.T) {
	cases := []struct {
		name      string
		exitCode  int32
		result    string
		wantEvent string
	}{
		{"deleted", 0, okResult(digest), "ArtifactDeleted"},
		{"cleanup fails", 1, permanent, "CleanupFailed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			startManager(t)
			ns := newNamespace(t)
			key := client.ObjectKey{Namespace: ns, Name: "doomed"}
			a := MakeArtifact(key.Name, ns).DeletionPolicy(v1alpha1.DeletionDelete).Obj()
			create(t, a)
			eventually(t, func(g Gomega) {
				g.Expect(controllerutil.ContainsFinalizer(getArtifact(g, key), pipeline.Finalizer)).To(BeTrue())
			})
			runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
			eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })

			NewWithT(t).Expect(env.Client.Delete(context.Background(), getArtifact(NewWithT(t), key))).To(Succeed())
			var cleanupJob = waitCleanupJob(t, ns, key.Name)
			c := cleanupJob.Spec.Template.Spec.Containers[0]
			if len(c.Args) != 1 || c.Args[0] != "delete" {
				t.Fatalf("cleanup args = %v", c.Args)
			}
			var doc workerv1.Delete
			for _, e := range c.Env {
				if e.Name == workerv1.EnvSpec {
					NewWithT(t).Expect(workerv1.DecodeSpec([]byte(e.Value), &doc)).To(Succeed())
				}
			}
			if doc.Reference != "registry.example.com/acme/tiny@"+digest || doc.Target.Tag != "v1" {
				t.Fatalf("cleanup spec = %+v", doc)
			}
			runJob(t, cleanupJob, tc.exitCode, tc.result)
			eventually(t, func(g Gomega) {
				err := env.Client.Get(context.Background(), key, &v1alpha1.Artifact{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "artifact still exists: %v", err)
				var evs eventsList
				g.Expect(env.Client.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
				reasons := map[string]bool{}
				for _, e := range evs.Items {
					reasons[e.Reason] = true
				}
				g.Expect(reasons).To(HaveKey(tc.wantEvent))
			})
		})
	}
}

func waitCleanupJob(t *testing.T, ns, owner string) *batchJob {
	t.Helper()
	var found *batchJob
	eventually(t, func(g Gomega) {
		found = nil
		for _, j := range jobsOf(g, ns, owner) {
			if j.Labels[pipeline.LabelInputs] == "cleanup" {
				found = &j
			}
		}
		g.Expect(found).NotTo(BeNil(), "no cleanup Job")
	})
	return found
}

// TestDeletionNeverBlocked: a deletion whose cleanup cannot run still ends,
// with a CleanupFailed warning that says why: a cleanup Job the API server
// refuses (here a ResourceQuota of zero Jobs), or a cleanup pod that cannot
// start (a missing Secret) for longer than --cleanup-give-up.
func TestDeletionNeverBlocked(t *testing.T) {
	cases := []struct {
		name     string
		before   func(t *testing.T, ns string)
		stuckPod bool
		// mount, when set, holds the cleanup pod in ContainerCreating with
		// this FailedMount event instead.
		mount     string
		wantInMsg string
	}{
		{name: "quota refuses the cleanup Job", before: func(t *testing.T, ns string) {
			hard := corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-jobs", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
			create(t, q)
			// Quota admission enforces status.hard, which the quota
			// controller (not running here) would fill in.
			q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}
			NewWithT(t).Expect(env.Client.Status().Update(context.Background(), q)).To(Succeed())
		}, wantInMsg: "exceeded quota"},
		{name: "cleanup pod stuck on a missing Secret", stuckPod: true, wantInMsg: "did not start within"},
		{name: "cleanup pod stuck on a volume mount", stuckPod: true,
			mount:     `MountVolume.SetUp failed for volume "push-auth" : secret "push-creds" not found`,
			wantInMsg: `did not start within 2s (FailedMount: pod %s cannot start: MountVolume.SetUp failed for volume "push-auth" : secret "push-creds" not found; it waits for Secret "push-creds" (spec.target.pushSecretRef, key .dockerconfigjson))`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			startManager(t, func(c *pipeline.Config) { c.CleanupGiveUp = 2 * time.Second })
			ns := newNamespace(t)
			key := client.ObjectKey{Namespace: ns, Name: "doomed"}
			a := MakeArtifact(key.Name, ns).DeletionPolicy(v1alpha1.DeletionDelete).PushSecret("push-creds").Obj()
			create(t, a)
			runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
			eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })
			if tc.before != nil {
				tc.before(t, ns)
			}
			NewWithT(t).Expect(env.Client.Delete(context.Background(), getArtifact(NewWithT(t), key))).To(Succeed())
			wantInMsg := tc.wantInMsg
			if tc.mount != "" {
				job := waitCleanupJob(t, ns, key.Name)
				pod := creatingPod(t, job, tc.mount)
				wantInMsg = fmt.Sprintf(tc.wantInMsg, pod.Name)
			} else if tc.stuckPod {
				job := waitCleanupJob(t, ns, key.Name)
				pod := MakePod(job.Name+"-x", ns, job.Name).Labels(job.Spec.Template.Labels).ControlledBy(job).Obj()
				pod.Spec = *job.Spec.Template.Spec.DeepCopy()
				create(t, pod)
				pod.Status = MakePod("", "", "").Waiting(pipeline.ReasonConfigError, `secret "push-creds" not found`).Status
				NewWithT(t).Expect(env.Client.Status().Update(context.Background(), pod)).To(Succeed())
			}
			eventually(t, func(g Gomega) {
				err := env.Client.Get(context.Background(), key, &v1alpha1.Artifact{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "artifact still exists: %v", err)
				var evs eventsList
				g.Expect(env.Client.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
				var notes []string
				for _, e := range evs.Items {
					if e.Reason == "CleanupFailed" {
						notes = append(notes, e.Note)
					}
				}
				g.Expect(notes).To(ContainElement(ContainSubstring(wantInMsg)))
			})
			if tc.stuckPod {
				// No garbage collector runs here: the run Job stays, the stuck
				// cleanup Job must be gone by the manager's own delete.
				eventually(t, func(g Gomega) {
					for _, j := range jobsOf(g, ns, key.Name) {
						g.Expect(j.Labels).NotTo(HaveKeyWithValue(pipeline.LabelInputs, "cleanup"), "stuck cleanup Job not deleted")
					}
				})
			}
		})
	}
}
