package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

// A private template: the fixture Git server wants credentials, which live
// in a Secret of the manager's template namespace, and renders push to a
// registry that wants credentials too, from the template's pushSecretRef
// in the same namespace. The Claim reaches Ready with a digest pulled back
// from that registry; the render ran in the template namespace, and the
// tenant's namespace holds no Job, pod, PVC or Secret, and nothing (events
// and the Claim included) that names the Secrets or holds the password.
// Deleting the Claim deletes its Job in the template namespace.
func TestPrivateTemplateRendersInTemplateNamespace(t *testing.T) {
	const (
		gitPassword = "GitPassE2EMARKER71"
		regPassword = "RegPassE2EMARKER72"
	)
	ctx := context.Background()
	repo := gitserver.Serve(t, gitserver.Repo{Name: "private", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}},
		gitserver.Options{Username: "platform-bot", Password: gitPassword})
	reg, err := sandbox.StartRegistry(sandbox.RegistryOptions{
		Dir: filepath.Join(t.TempDir(), "private-registry"), Bin: registryBin, Users: map[string]string{"pusher": regPassword},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Stop()

	tplNS := sandbox.ManagerNamespace // the manager runs with --template-namespace=packline-system
	if err := sb.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tplNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tenant := newNamespace(t)
	repoSecret, pushSecret := "tpl-repo-"+tenant, "tpl-push-"+tenant
	dockerConfig, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte("pusher:" + regPassword))}}})
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: repoSecret, Namespace: tplNS},
			StringData: map[string]string{"username": "platform-bot", "password": gitPassword}},
		{ObjectMeta: metav1.ObjectMeta{Name: pushSecret, Namespace: tplNS}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}},
	} {
		create(t, s)
		t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), s) })
	}
	tpl := wrappers.MakeClaimTemplate("private-"+tenant).Source(repo.URL, "main", "apps/code-server/base").Private(repoSecret, pushSecret).
		Service("code-server").ForNamespaces(sandbox.TenantLabels).Open().RepositoryPrefix(reg.Host + "/claims").Obj()
	// No values: the defaults of the template repository.
	tpl.Spec.ValuesSchema, tpl.Spec.Parameters = nil, nil
	// The sandbox registry speaks plain HTTP: the template says so, for
	// the admin's push credential (a Claim may not decide it).
	tpl.Spec.PushPlainHTTP = true
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	c := wrappers.MakeClaim("private-ide", tenant, tpl.Name).Target(v1alpha1.Target{Tag: "v1", PlainHTTP: true}).Obj()
	create(t, c)
	waitReady(t, c, c.GetPipelineStatus)

	g := NewWithT(t)
	g.Expect(c.Status.Reference).To(HavePrefix(reg.Host + "/claims/" + tenant + "/private-ide@sha256:"))
	g.Expect(c.Status.SourceRevision).To(Equal(repo.Commits[0]))
	pulled, err := pullWithAuth(ctx, c.Status.Reference, "pusher", regPassword)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled.Digest.String()).To(Equal(c.Status.Digest))

	var jobs batchv1.JobList
	g.Expect(sb.Client.List(ctx, &jobs, client.InNamespace(tplNS), client.MatchingLabels{pipeline.LabelOwnerUID: string(c.UID)})).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "the render ran in the template namespace")
	g.Expect(jobs.Items[0].Labels).To(HaveKeyWithValue(pipeline.LabelOwnerNamespace, tenant))

	// The tenant's namespace: no workload or storage of the render at all,
	// no Secret, and no object that names the Secrets or holds a password.
	for _, l := range []client.ObjectList{&batchv1.JobList{}, &corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &corev1.SecretList{}} {
		g.Expect(sb.Client.List(ctx, l, client.InNamespace(tenant))).To(Succeed())
		g.Expect(apimeta.LenList(l)).To(BeZero(), "%T in the tenant namespace", l)
	}
	var events int
	for _, l := range []client.ObjectList{&batchv1.JobList{}, &corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &corev1.SecretList{},
		&corev1.ConfigMapList{}, &corev1.ServiceAccountList{}, &eventsv1.EventList{}, &corev1.EventList{}, &v1alpha1.ClaimList{}} {
		g.Expect(sb.Client.List(ctx, l, client.InNamespace(tenant))).To(Succeed())
		items, err := apimeta.ExtractList(l)
		g.Expect(err).NotTo(HaveOccurred())
		for _, it := range items {
			if _, ok := it.(*eventsv1.Event); ok {
				events++
			}
			b, err := json.Marshal(it)
			g.Expect(err).NotTo(HaveOccurred())
			for _, marker := range []string{repoSecret, pushSecret, gitPassword, regPassword, "template-auth"} {
				g.Expect(strings.Contains(string(b), marker)).To(BeFalse(), "%T in the tenant namespace holds %q: %s", it, marker, b)
			}
		}
	}
	g.Expect(events).To(BeNumerically(">", 0), "the scan must see the Claim's events")

	// No owner reference reaches the template namespace; the Claim's
	// finalizer deletes its Job there.
	g.Expect(sb.Client.Delete(ctx, c)).To(Succeed())
	waitFor(t, func(g Gomega) {
		err := sb.Client.Get(ctx, client.ObjectKeyFromObject(c), &v1alpha1.Claim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Claim still exists: %v", err)
		var left batchv1.JobList
		g.Expect(sb.Client.List(ctx, &left, client.InNamespace(tplNS), client.MatchingLabels{pipeline.LabelOwnerUID: string(c.UID)})).To(Succeed())
		g.Expect(left.Items).To(BeEmpty())
	}).Should(Succeed(), "logs in %s", logsHint())
}

// pullWithAuth copies reference, with everything it points at, from a
// registry that wants basic auth; oras verifies every digest.
func pullWithAuth(ctx context.Context, reference, user, password string) (ocispec.Descriptor, error) {
	repo, err := remote.NewRepository(reference)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	repo.PlainHTTP = true
	repo.Client = &auth.Client{Credential: auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: user, Password: password})}
	return oras.Copy(ctx, repo, repo.Reference.Reference, memory.New(), "", oras.DefaultCopyOptions)
}
