package e2e

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/cosigntest"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// cosignSecret is the Secret `cosign generate-key-pair k8s://ns/name`
// would write: the encrypted key, its password and the public key.
func cosignSecret(t *testing.T, ns, name string) cosigntest.KeyPair {
	t.Helper()
	kp := cosigntest.GenerateKeyPair(t, "e2e-pass")
	key, err := os.ReadFile(kp.Private())
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(kp.Public())
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data: map[string][]byte{"cosign.key": key, "cosign.password": []byte(kp.Password), "cosign.pub": pub}}
	create(t, s)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), s) })
	return kp
}

func verifySigned(t *testing.T, kp cosigntest.KeyPair, st *v1alpha1.PipelineStatus) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(st.Signature).To(HavePrefix("sha256:"))
	g.Expect(st.Attestation).To(HavePrefix("sha256:"))
	signed := condition(st, v1alpha1.ConditionSigned)
	g.Expect(signed).NotTo(BeNil())
	g.Expect(signed.Status).To(Equal(metav1.ConditionTrue))
	if out, err := cosigntest.Verify(t, kp.Public(), st.Reference); err != nil {
		t.Fatalf("cosign verify %s: %v\n%s", st.Reference, err, out)
	}
	if out, err := cosigntest.VerifyAttestation(t, kp.Public(), st.Reference); err != nil {
		t.Fatalf("cosign verify-attestation %s: %v\n%s", st.Reference, err, out)
	}
}

// An Artifact with spec.signing, through the real control plane: the
// process node mounts the key Secret's two keys, the worker signs, and
// cosign verifies the digest in status.
func TestSignedArtifact(t *testing.T) {
	ns := newNamespace(t)
	kp := cosignSecret(t, ns, "cosign")
	a := newArtifact(ns, "signed", "packline/tiny-model").Obj()
	a.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign"}}
	create(t, a)
	waitReady(t, a, a.GetPipelineStatus)
	verifySigned(t, kp, &a.Status)
}

// An EnvironmentProfile that signs: its key Secret lives in the template
// namespace, the Claim's render runs there, and the tenant's namespace
// holds no Secret and no Job of it.
func TestProfileSignsClaim(t *testing.T) {
	ctx := context.Background()
	tplNS := sandbox.ManagerNamespace
	if err := sb.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tplNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tenant := newNamespace(t)
	nsObj := &corev1.Namespace{}
	g := NewWithT(t)
	g.Expect(sb.Client.Get(ctx, client.ObjectKey{Name: tenant}, nsObj)).To(Succeed())
	nsObj.Labels["packline.dev/signing-e2e"] = tenant
	g.Expect(sb.Client.Update(ctx, nsObj)).To(Succeed())

	kp := cosignSecret(t, tplNS, "platform-cosign-"+tenant)
	profile := &v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: "signing-" + tenant}, Spec: v1alpha1.EnvironmentProfileSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"packline.dev/signing-e2e": tenant}},
		Priority:          1000000,
		Signing:           &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "platform-cosign-" + tenant}},
	}}
	create(t, profile)
	t.Cleanup(func() { _ = sb.Client.Delete(ctx, profile) })

	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "signed-" + tenant},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:           v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/code-server/base"},
			Kinds:            []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
			Service:          "code-server",
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
			// The sandbox registry speaks plain HTTP; a signed Claim's push
			// goes as the template says, not as the Claim does.
			PushPlainHTTP: true,
		},
	}
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(ctx, tpl) })
	c := &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: "signed-ide", Namespace: tenant},
		Spec:       v1alpha1.ClaimSpec{TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name}, Target: &v1alpha1.Target{Tag: "v1", PlainHTTP: true}},
	}
	create(t, c)
	waitReady(t, c, c.GetPipelineStatus)
	verifySigned(t, kp, &c.Status.PipelineStatus)
	g.Expect(c.Status.Reference).To(HavePrefix(sb.Registry.Host + "/claims/" + tenant + "/signed-ide@sha256:"))

	var jobs batchv1.JobList
	g.Expect(sb.Client.List(ctx, &jobs, client.InNamespace(tplNS), client.MatchingLabels{pipeline.LabelOwnerUID: string(c.UID)})).To(Succeed())
	g.Expect(jobs.Items).To(HaveLen(1), "the render ran in the template namespace, where the key is")
	for _, l := range []client.ObjectList{&batchv1.JobList{}, &corev1.SecretList{}} {
		g.Expect(sb.Client.List(ctx, l, client.InNamespace(tenant))).To(Succeed())
		g.Expect(apimeta.LenList(l)).To(BeZero(), "%T in the tenant namespace", l)
	}
}
