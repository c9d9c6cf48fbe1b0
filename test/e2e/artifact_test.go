package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/hfserver"
)

// ownedJobs lists the Jobs the manager made for an owner.
func ownedJobs(g Gomega, ns, owner string) []batchv1.Job {
	var jobs batchv1.JobList
	g.Expect(sb.Client.List(context.Background(), &jobs, client.InNamespace(ns),
		client.MatchingLabels{pipeline.LabelOwnerName: owner})).To(Succeed())
	return jobs.Items
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestArtifactReadyWithPullableDigest(t *testing.T) {
	ns := newNamespace(t)
	a := newArtifact(ns, "tiny", "packline/tiny-model").Obj()
	create(t, a)
	waitReady(t, a, a.GetPipelineStatus)

	g := NewWithT(t)
	st := a.Status
	g.Expect(st.Phase).To(Equal(v1alpha1.PhaseSucceeded))
	g.Expect(st.Digest).To(HavePrefix("sha256:"))
	g.Expect(st.Reference).To(Equal(a.Spec.Target.Repository + "@" + st.Digest))
	g.Expect(st.SourceRevision).To(Equal(hfserver.TinyModel().Commit()))
	pulled, err := sb.Pull(context.Background(), st.Reference)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled.Manifest.Digest.String()).To(Equal(st.Digest))
	g.Expect(pulled.Blobs).To(BeNumerically(">=", 3), "manifest, config and at least one layer")

	// The real Job controller, not a test, completes the Job (the run is
	// Ready as soon as its pod succeeded; the Job's record follows).
	waitFor(t, func(g Gomega) {
		jobs := ownedJobs(g, ns, a.Name)
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobComplete(&jobs[0])).To(BeTrue(), "job conditions %+v", jobs[0].Status.Conditions)
	}).Should(Succeed())
}

func TestSpecEditMakesNewDigestAndRemovesOldJob(t *testing.T) {
	sb.HF.Set("packline/other-model", hfserver.Repo{Files: map[string][]byte{
		"config.json":       []byte(`{"hidden_size":16}`),
		"model.safetensors": []byte("other weights"),
	}})
	ns := newNamespace(t)
	a := newArtifact(ns, "edited", "packline/tiny-model").Obj()
	create(t, a)
	waitReady(t, a, a.GetPipelineStatus)
	first := a.Status.Digest
	g := NewWithT(t)
	oldJobs := ownedJobs(g, ns, a.Name)
	g.Expect(oldJobs).To(HaveLen(1))

	a.Spec.Source.HuggingFace.Repo = "packline/other-model"
	g.Expect(sb.Client.Update(context.Background(), a)).To(Succeed())
	waitReady(t, a, a.GetPipelineStatus)
	g.Expect(a.Status.Digest).NotTo(BeEmpty())
	g.Expect(a.Status.Digest).NotTo(Equal(first))
	_, err := sb.Pull(context.Background(), a.Status.Reference)
	g.Expect(err).NotTo(HaveOccurred())

	waitFor(t, func(g Gomega) {
		err := sb.Client.Get(context.Background(), client.ObjectKeyFromObject(&oldJobs[0]), &batchv1.Job{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "old Job %s still exists (err %v)", oldJobs[0].Name, err)
	}).Should(Succeed())
	g.Expect(ownedJobs(g, ns, a.Name)).To(HaveLen(1))
}

// With the manager stopped, only the real garbage collector can remove the
// Job, its pod and the workspace PVC of a deleted Artifact; the process
// node must kill the worker whose pod goes away.
func TestDeleteMidRunIsCollectedByGarbageCollector(t *testing.T) {
	release := sb.HF.Hold()
	defer release()
	ns := newNamespace(t)
	a := newArtifact(ns, "deleted", "packline/tiny-model").Obj()
	create(t, a)
	pod := waitRunningPod(t, ns, a.Name)
	g := NewWithT(t)
	jobs := ownedJobs(g, ns, a.Name)
	g.Expect(jobs).To(HaveLen(1))
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(sb.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pipeline.WorkspaceName(a.Name)}, pvc)).To(Succeed())

	sb.StopManager()
	defer func() { g.Expect(sb.StartManager()).To(Succeed()) }()
	g.Expect(sb.Client.Delete(context.Background(), a)).To(Succeed())

	for _, o := range []client.Object{&jobs[0], pvc, pod} {
		waitFor(t, func(g Gomega) {
			err := sb.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still exists (err %v)", o, o.GetName(), err)
		}).Should(Succeed())
	}
}

// waitRunningPod waits until the owner's worker pod is Running and returns it.
func waitRunningPod(t testing.TB, ns, owner string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	waitFor(t, func(g Gomega) {
		var pods corev1.PodList
		g.Expect(sb.Client.List(context.Background(), &pods, client.InNamespace(ns),
			client.MatchingLabels{pipeline.LabelOwnerName: owner})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}).Should(Succeed())
	return &pod
}
