package controllers_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	. "github.com/packline/packline/test/wrappers"
)

// TestInstances: two managers share one API server. Each drives only the
// Artifacts of its instance (the default one: those without the label), and
// labels what it creates; an Artifact of an instance that no manager runs is
// untouched. Moving a running Artifact to the other instance hands its Job
// over: the new instance finishes the run with the same Job, never a second.
func TestInstances(t *testing.T) {
	startManager(t, func(c *pipeline.Config) { c.Instance = "blue" })
	startManager(t) // the default instance
	ns := newNamespace(t)
	instanceOf := func(name, instance string) *v1alpha1.Artifact {
		a := MakeArtifact(name, ns).Obj()
		if instance != "" {
			a.Labels = map[string]string{pipeline.LabelInstance: instance}
		}
		create(t, a)
		return a
	}
	instanceOf("for-blue", "blue")
	instanceOf("for-default", "")
	instanceOf("for-green", "green")

	blueJob := waitJob(t, ns, "for-blue", 1, 1)
	defJob := waitJob(t, ns, "for-default", 1, 1)
	g := NewWithT(t)
	g.Expect(blueJob.Labels).To(HaveKeyWithValue(pipeline.LabelInstance, "blue"))
	g.Expect(blueJob.Spec.Template.Labels).To(HaveKeyWithValue(pipeline.LabelInstance, "blue"))
	g.Expect(defJob.Labels).NotTo(HaveKey(pipeline.LabelInstance))
	// Both managers have acted on their own; the green one has no manager.
	eventually(t, func(g Gomega) {
		g.Expect(getArtifact(g, client.ObjectKey{Namespace: ns, Name: "for-blue"}).Status.Phase).NotTo(BeEmpty())
		g.Expect(getArtifact(g, client.ObjectKey{Namespace: ns, Name: "for-default"}).Status.Phase).NotTo(BeEmpty())
	})
	green := getArtifact(g, client.ObjectKey{Namespace: ns, Name: "for-green"})
	g.Expect(green.Status.Phase).To(BeEmpty(), "another instance's Artifact was reconciled")
	g.Expect(green.Finalizers).To(BeEmpty())
	g.Expect(jobsOf(g, ns, "for-green")).To(BeEmpty())

	// Move the running blue Artifact to the default instance.
	pod := runPod(t, blueJob)
	key := client.ObjectKey{Namespace: ns, Name: "for-blue"}
	eventually(t, func(g Gomega) {
		moved := getArtifact(g, key)
		delete(moved.Labels, pipeline.LabelInstance)
		g.Expect(env.Client.Update(context.Background(), moved)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		jobs := jobsOf(g, ns, "for-blue")
		g.Expect(jobs).To(HaveLen(1))
		g.Expect(jobs[0].Name).To(Equal(blueJob.Name))
		g.Expect(jobs[0].Labels).NotTo(HaveKey(pipeline.LabelInstance), "the Job was not handed over")
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), p)).To(Succeed())
		g.Expect(p.Labels).NotTo(HaveKey(pipeline.LabelInstance), "the pod was not handed over")
		pod = p
	})
	finishPod(t, blueJob, pod, 0, okResult(digest))
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(a.Status.Digest).To(Equal(digest))
		g.Expect(a.Status.Attempts).To(Equal(int32(1)))
	})
	g.Expect(jobsOf(g, ns, "for-blue")).To(HaveLen(1), "a duplicate Job was created")
}

// TestMultiKueueContract: with --job-managed-by kueue.x-k8s.io/multikueue, a
// queued Artifact's Job carries what a multi-cluster dispatcher needs (the
// queue label, suspension until admitted, spec.managedBy), the controller
// never edits it after creation, and the status the dispatcher mirrors back
// from the worker cluster (no pods here) reads as Running, then as a clear
// ResultNotMirrored instead of a bare InvalidResult.
func TestMultiKueueContract(t *testing.T) {
	const multiKueue = "kueue.x-k8s.io/multikueue"
	startManager(t, func(c *pipeline.Config) { c.JobManagedBy = multiKueue })
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "far"}
	create(t, MakeArtifact(key.Name, ns).Queue("multi").Obj())
	job := waitJob(t, ns, key.Name, 1, 1)
	g := NewWithT(t)
	g.Expect(job.Labels).To(HaveKeyWithValue(pipeline.QueueLabel, "multi"))
	g.Expect(job.Spec.Suspend).To(HaveValue(BeTrue()))
	g.Expect(job.Spec.ManagedBy).To(HaveValue(Equal(multiKueue)))
	eventually(t, func(g Gomega) { g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseQueued)) })

	// The dispatcher admits the workload and mirrors the remote status.
	eventually(t, func(g Gomega) {
		j := &batchv1.Job{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), j)).To(Succeed())
		j.Spec.Suspend = ptr.To(false)
		g.Expect(env.Client.Update(context.Background(), j)).To(Succeed())
		j.Status = MakeJob("", "").Active().Status
		g.Expect(env.Client.Status().Update(context.Background(), j)).To(Succeed())
		job = j
	})
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseRunning))
		g.Expect(apimeta.FindStatusCondition(a.Status.Conditions, v1alpha1.ConditionReady).Message).To(ContainSubstring("worker cluster"))
	})
	j := &batchv1.Job{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), j)).To(Succeed())
	g.Expect(j.Generation).To(Equal(job.Generation), "the controller edited the Job spec")
	g.Expect(j.Spec.ManagedBy).To(HaveValue(Equal(multiKueue)))
	// The workspace travels with the pod (the PVC exists only here), and
	// none is made here.
	g.Expect(j.Spec.Template.Spec.Volumes[0].Ephemeral).NotTo(BeNil(), "a dispatched Job must not mount this cluster's workspace PVC")
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pipeline.WorkspaceName(key.Name)},
		&corev1.PersistentVolumeClaim{})).NotTo(Succeed())

	// The worker cluster's run completes; no pod is seen here. A local Job
	// (no queue, not dispatched) reads the result from the registry, and
	// its result is the run's.
	eventually(t, func(g Gomega) {
		cur := &batchv1.Job{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), cur)).To(Succeed())
		// Keep the mirrored startTime: it is immutable once set, and a new
		// one differs whenever the second has turned since.
		cur.Status = (&JobWrapper{Job: *cur}).Complete().Status
		g.Expect(env.Client.Status().Update(context.Background(), cur)).To(Succeed())
	})
	var resolve *batchv1.Job
	eventually(t, func(g Gomega) {
		resolve = nil
		for _, j := range jobsOf(g, ns, key.Name) {
			if strings.HasPrefix(j.Labels[pipeline.LabelInputs], "r") {
				resolve = &j
			}
		}
		g.Expect(resolve).NotTo(BeNil(), "no Job reads the dispatched result")
		g.Expect(getArtifact(g, key).Status.Phase).To(Equal(v1alpha1.PhaseRunning))
	})
	g.Expect(resolve.Spec.ManagedBy).To(BeNil())
	g.Expect(resolve.Labels).NotTo(HaveKey(pipeline.QueueLabel))
	g.Expect(resolve.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"resolve"}))
	runJob(t, resolve, 0, okResult(digest))
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(a.Status.Digest).To(Equal(digest))
	})
}
