package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// A Claim renders the fixture template repository, served over git smart
// HTTP, and pushes the manifests as one pullable artifact.
func TestClaimReadyWithPullableDigest(t *testing.T) {
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "code-server-" + ns},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:  v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/code-server/base"},
			Kinds:   []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
			Service: "code-server",
			ValuesSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","additionalProperties":false,
				"properties":{"replicas":{"type":"integer","minimum":1,"maximum":3}}}`)},
			Parameters: []v1alpha1.ParameterBinding{{Value: "replicas", Kind: "Replicas",
				Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "code-server"}}},
			Exposures:        []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureType("ClusterIP")}},
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	c := &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: "my-code-server", Namespace: ns},
		Spec: v1alpha1.ClaimSpec{
			TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name},
			Values:      &apiextensionsv1.JSON{Raw: []byte(`{"replicas":2}`)},
			Exposure:    v1alpha1.Exposure{Type: v1alpha1.ExposureType("ClusterIP")},
			Target:      &v1alpha1.Target{PlainHTTP: true},
		},
	}
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
	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "wrong-path-" + ns},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:           v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/no-such-app"},
			Kinds:            []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}},
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
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

	c := &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: "waits", Namespace: ns},
		Spec:       v1alpha1.ClaimSpec{TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name}, Target: &v1alpha1.Target{PlainHTTP: true}},
	}
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
