package realnode

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/hfserver"
)

// ownedPods are the worker pods of an owner's Jobs.
func ownedPods(g Gomega, ns, owner string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(sb.Client.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{pipeline.LabelOwnerName: owner})).To(Succeed())
	return pods.Items
}

// An Artifact from the fixture hub reaches Ready with its digest, its
// worker having run as a container of the shipped worker image: scheduled
// by kube-scheduler onto the real node, pulled by containerd from the
// sandbox registry, started by runc.
func TestArtifactReadyOnRealNode(t *testing.T) {
	requireNode(t)
	ns := newNamespace(t, sb, nil)
	a := newArtifact(sb, ns, "tiny").Obj()
	if err := sb.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	waitReady(t, sb, a)

	g := NewWithT(t)
	g.Expect(a.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
	g.Expect(a.Status.Digest).To(HavePrefix("sha256:"))
	g.Expect(a.Status.Reference).To(Equal(a.Spec.Target.Repository + "@" + a.Status.Digest))
	g.Expect(a.Status.SourceRevision).To(Equal(hfserver.TinyModel().Commit()))
	pulled, err := sb.Pull(context.Background(), a.Status.Reference)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled.Manifest.Digest.String()).To(Equal(a.Status.Digest))

	pods := ownedPods(g, ns, a.Name)
	g.Expect(pods).NotTo(BeEmpty())
	p := pods[0]
	g.Expect(p.Spec.NodeName).To(Equal(sb.NodeName()))
	g.Expect(p.Status.PodIP).To(HavePrefix("10.88."), "an address on the sandbox's bridge")
	g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty())
	cs := p.Status.ContainerStatuses[0]
	g.Expect(p.Spec.Containers[0].Image).To(Equal(sb.WorkerImage()))
	g.Expect(cs.ImageID).To(ContainSubstring("/packline/worker@sha256:"), "containerd pulled the worker image from the sandbox registry")
	g.Expect(cs.ContainerID).To(HavePrefix("containerd://"))
	g.Expect(cs.State.Terminated).NotTo(BeNil())
	g.Expect(cs.State.Terminated.ExitCode).To(BeZero())
}
