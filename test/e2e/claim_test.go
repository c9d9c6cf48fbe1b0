package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

// A Claim renders the fixture template repository, served over git smart
// HTTP, and pushes the manifests as one pullable artifact.
func TestClaimReadyWithPullableDigest(t *testing.T) {
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate("code-server-"+ns).Source(repo.URL, "main", "apps/code-server/base").Service("code-server").
		Schema(`{"type":"object","additionalProperties":false,"properties":{"replicas":{"type":"integer","minimum":1,"maximum":3}}}`).
		Exposures(v1alpha1.ExposureClusterIP).ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	c := wrappers.MakeClaim("my-code-server", ns, tpl.Name).Values(`{"replicas":2}`).Exposure(v1alpha1.ExposureClusterIP).
		Target(v1alpha1.Target{PlainHTTP: true}).Obj()
	create(t, c)
	waitReady(t, c, c.GetPipelineStatus)

	g := NewWithT(t)
	g.Expect(c.Status.Reference).To(HavePrefix(sb.Registry.Host + "/claims/" + ns + "/my-code-server@sha256:"))
	g.Expect(c.Status.SourceRevision).To(Equal(repo.Commits[0]))
	pulled, err := sb.Pull(context.Background(), c.Status.Reference)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled.Manifest.Digest.String()).To(Equal(c.Status.Digest))
	g.Expect(pulled.Blobs).To(Equal(3), "manifest, Flux config and the one manifests layer")

	// The template's own check rendered the same commit, pushing nothing.
	waitFor(t, func(g Gomega) {
		cur := &v1alpha1.ClaimTemplate{}
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(tpl), cur)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(cur.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
		g.Expect(cur.Status.Check).NotTo(BeNil())
		g.Expect(cur.Status.Check.ResolvedCommit).To(Equal(repo.Commits[0]))
		g.Expect(cur.Status.Check.Kinds).To(Equal([]string{"Deployment.apps", "PersistentVolumeClaim", "Service"}))
	}).Should(Succeed())
}

// A template published with a path its repository does not have fails its
// check: Ready=False naming the path, and a Claim of it waits with
// TemplateNotReady (no render Job) instead of failing on its own.
func TestTemplateCheckCatchesWrongPath(t *testing.T) {
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate("wrong-path-"+ns).Source(repo.URL, "main", "apps/no-such-app").
		Kinds(v1alpha1.RenderedKind{Group: "apps", Kind: "Deployment"}).ForNamespaces(sandbox.TenantLabels).
		RepositoryPrefix(sb.Registry.Host + "/claims").Obj()
	tpl.Spec.ValuesSchema, tpl.Spec.Parameters = nil, nil
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	waitFor(t, func(g Gomega) {
		cur := &v1alpha1.ClaimTemplate{}
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(tpl), cur)).To(Succeed())
		ready := apimeta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Message).To(ContainSubstring("apps/no-such-app"))
	}).Should(Succeed())

	c := wrappers.MakeClaim("waits", ns, tpl.Name).Target(v1alpha1.Target{PlainHTTP: true}).Obj()
	create(t, c)
	waitFor(t, func(g Gomega) {
		cur := &v1alpha1.Claim{}
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(c), cur)).To(Succeed())
		ready := apimeta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal("TemplateNotReady"))
		g.Expect(ready.Message).To(ContainSubstring("apps/no-such-app"))
	}).Should(Succeed())
	g := NewWithT(t)
	g.Expect(ownedJobs(g, ns, c.Name)).To(BeEmpty(), "a Claim of a failed template rendered")
}
