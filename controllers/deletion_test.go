package controllers_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/jobs/spec"
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
			a := makeArtifact(key.Name, ns).Obj()
			a.Spec.DeletionPolicy = v1alpha1.DeletionDelete
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
			var doc spec.Delete
			for _, e := range c.Env {
				if e.Name == spec.EnvSpec {
					NewWithT(t).Expect(spec.Decode([]byte(e.Value), &doc)).To(Succeed())
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
