package controllers_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/wrappers"
)

// forgeReference plays a tenant with the artifacts/status right: it points
// status.reference at a manifest of its choice, keeping everything else
// (the seal included).
func forgeReference(t *testing.T, key client.ObjectKey, ref string) {
	t.Helper()
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		a.Status.Reference = ref
		g.Expect(env.Client.Status().Update(context.Background(), a)).To(Succeed())
	})
}

// TestForgedReferenceIsNotThePreviousPush: the worker trusts the layer keys
// of the manifest it is handed as the previous push, and a profile's key
// then signs layers chosen by them. So a new run hands on only a push the
// manager sealed (status.pushSeal), of the Artifact itself or of a mirror
// of the same source; a reference a tenant wrote into status is neither.
func TestForgedReferenceIsNotThePreviousPush(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	genuine := "registry.example.com/acme/tiny@" + digest
	forged := "registry.example.com/evil/tiny@" + digest
	succeed := func(name string) client.ObjectKey {
		key := client.ObjectKey{Namespace: ns, Name: name}
		create(t, wrappers.MakeArtifact(name, ns).Obj())
		runJob(t, waitJob(t, ns, name, 1, 1), 0, okResult(digest))
		eventually(t, func(g Gomega) {
			st := getArtifact(g, key).Status
			g.Expect(st.Phase).To(Equal(v1alpha1.PhaseSucceeded))
			g.Expect(st.PushSeal).NotTo(BeEmpty(), "the manager seals the push it recorded")
		})
		return key
	}
	first := succeed("first")
	liar := succeed("liar")
	forgeReference(t, liar, forged)

	create(t, wrappers.MakeArtifact("mirror", ns).Repository("registry.example.com/mirror/tiny").Obj())
	NewWithT(t).Expect(artifactDoc(t, waitJob(t, ns, "mirror", 1, 1)).Previous).To(Equal([]string{genuine}),
		"a mirror gets the sealed push of the same source, not the forged one")

	forgeReference(t, first, forged)
	eventually(t, func(g Gomega) {
		a := getArtifact(g, first)
		a.Spec.Target.Tag = "v2"
		g.Expect(env.Client.Update(context.Background(), a)).To(Succeed())
	})
	NewWithT(t).Expect(artifactDoc(t, waitJob(t, ns, first.Name, 2, 1)).Previous).To(BeEmpty(),
		"a forged status.reference is not the previous push: the run imports from scratch")
}

// TestForgedPodResultIsIgnored: a tenant may create pods in its namespace
// with a Job's labels (job-name, owner labels, a controller reference to
// a made-up Job UID that agrees with its controller-uid label) and a
// termination message of its choice. Only a pod the Job controls by UID is
// read: the run waits for the Job's own pod and takes its digest.
func TestForgedPodResultIsIgnored(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "victim"}
	create(t, wrappers.MakeArtifact(key.Name, ns).Obj())
	job := waitJob(t, ns, key.Name, 1, 1)

	forgedDigest := "sha256:" + strings.Repeat("f", 64)
	fake := wrappers.MakePod("forged", ns, job.Name).Labels(job.Spec.Template.Labels).
		Labels(map[string]string{batchv1.ControllerUidLabel: "forged-uid"}).Obj()
	fake.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: "forged-uid", Controller: ptr.To(true)}}
	create(t, fake)
	fake.Status = wrappers.MakePod("", "", "").Terminated(0, okResult(forgedDigest)).Status
	NewWithT(t).Expect(env.Client.Status().Update(context.Background(), fake)).To(Succeed())

	// The Job's own pod starts after the forged one finished: a run that
	// read the forged pod would already be Succeeded, never Running on it.
	pod := runPod(t, job)
	eventually(t, func(g Gomega) {
		a := getArtifact(g, key)
		g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseRunning))
		g.Expect(condition(a, v1alpha1.ConditionReconciling).Message).To(ContainSubstring(pod.Name))
	})
	finishPod(t, job, pod, 0, okResult(digest))
	eventually(t, func(g Gomega) {
		st := getArtifact(g, key).Status
		g.Expect(st.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		g.Expect(st.Digest).To(Equal(digest), "the digest is the Job's own pod's, not the forged pod's")
	})
}
