package controllers_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// A PVC named <artifact>-workspace that packline did not make (another
// app's data volume, here even labelled like packline's) is neither
// mounted by a Job nor deleted: the Artifact stalls with WorkspaceConflict
// naming it. Once it is gone the run goes on with a workspace of its own,
// and freeing that one after success leaves nothing else touched.
func TestForeignWorkspaceIsNeitherMountedNorDeleted(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: "x"}
	foreign := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pipeline.WorkspaceName(key.Name), Namespace: ns,
			// Labels anyone with create on PVCs writes: no proof of anything.
			Labels: map[string]string{pipeline.LabelManagedBy: "packline", pipeline.LabelOwnerKind: "Artifact", pipeline.LabelOwnerName: key.Name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	create(t, foreign)
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())

	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		stalled := condition(a, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(pipeline.ReasonWorkspaceConflict))
		g.Expect(stalled.Message).To(ContainSubstring(fmt.Sprintf("workspace PVC %s/%s exists but was not made for this Artifact", ns, foreign.Name)))
		g.Expect(condition(a, v1alpha1.ConditionReady).Reason).To(Equal(pipeline.ReasonWorkspaceConflict))
	})
	g := NewWithT(t)
	g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty(), "no Job may mount a PVC the run does not own")
	got := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
	g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
	g.Expect(got.UID).To(Equal(foreign.UID))
	g.Expect(got.OwnerReferences).To(BeEmpty(), "not adopted")

	// The owner of the foreign PVC removes it; the run goes on. envtest
	// runs no pvc-protection controller: play it (drop its finalizer).
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	eventually(t, func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), pvc)
		if apierrors.IsNotFound(err) {
			return
		}
		g.Expect(err).NotTo(HaveOccurred())
		if pvc.UID == foreign.UID {
			pvc.Finalizers = nil
			g.Expect(env.Client.Update(ctx, pvc)).To(Succeed())
			g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), pvc))).To(BeTrue())
		}
	})
	job := waitJob(t, ns, key.Name, 1, 1)
	var own *corev1.PersistentVolumeClaim
	eventually(t, func(g Gomega) {
		own = &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), own)).To(Succeed())
		g.Expect(own.UID).NotTo(Equal(foreign.UID))
		g.Expect(metav1.IsControlledBy(own, getArtifact(g, key))).To(BeTrue())
	})
	runJob(t, job, 0, okResult(digest))
	eventually(t, func(g Gomega) {
		g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		pvc := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), pvc)
		g.Expect(apierrors.IsNotFound(err) || !pvc.DeletionTimestamp.IsZero()).To(BeTrue(), "own workspace not freed")
	})
}
