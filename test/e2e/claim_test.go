package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

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
}
