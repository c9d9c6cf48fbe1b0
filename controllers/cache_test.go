package controllers_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// A Job that merely carries an Artifact's labels (a tenant's copy, a
// restored backup) is not the manager's: it is not cached, so it neither
// inflates the manager's memory nor passes for a later attempt of the run.
// The copy exists before the manager starts, so its first reconcile already
// runs on a cache that was offered the copy.
func TestCopiedLabelsDoNotPassForAChild(t *testing.T) {
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "copied"}
	a := wrappers.MakeArtifact(key.Name, ns).Queue("q").Obj()
	create(t, a)
	work, err := controllers.ArtifactWork(a)
	if err != nil {
		t.Fatal(err)
	}
	owner := pipeline.Owner{GVK: v1alpha1.GroupVersion.WithKind("Artifact"), Name: a.Name, Namespace: ns, UID: string(a.UID)}
	// What the manager would make for attempt 7, minus the owner reference.
	copied := pipeline.BuildJob(pipeline.JobParams{Owner: owner, Generation: a.Generation, Attempt: 7, InputsHash: work.InputsHash,
		Image: "worker", Command: "artifact", SpecJSON: "{}", QueueName: "q", Resources: &corev1.ResourceRequirements{}})
	copied.OwnerReferences = nil
	create(t, copied)

	startManager(t)
	want := pipeline.JobName(a.Name, a.Generation, work.InputsHash, 1)
	eventually(t, func(g Gomega) {
		st := getArtifact(g, key).Status
		g.Expect(st.Phase).To(Equal(v1alpha1.PhaseQueued))
		g.Expect(st.Attempts).To(Equal(int32(1)), "the copy passed for attempt 7")
		g.Expect(st.JobRef).To(Equal(&corev1.LocalObjectReference{Name: want}))
	})
	// The copy is left alone: not adopted, not deleted.
	j := &batchv1.Job{}
	NewWithT(t).Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(copied), j)).To(Succeed())
	NewWithT(t).Expect(j.DeletionTimestamp).To(BeNil())
	NewWithT(t).Expect(j.OwnerReferences).To(BeEmpty())
}
