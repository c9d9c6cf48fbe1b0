package e2e

import (
	"context"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// codeServerTemplate is an open template of the code-server fixture,
// exposed as ClusterIP, pushing to the sandbox registry.
func codeServerTemplate(t *testing.T, name string) *v1alpha1.ClaimTemplate {
	t.Helper()
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:           v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/code-server/base"},
			Kinds:            []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
			Service:          "code-server",
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })
	return tpl
}

// deliveredCodeServer is a Claim of tpl delivered as "deployer".
func deliveredCodeServer(name, ns, tpl string) *v1alpha1.Claim {
	return &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ClaimSpec{
			TemplateRef: v1alpha1.TemplateReference{Name: tpl},
			Exposure:    v1alpha1.Exposure{Type: v1alpha1.ExposureClusterIP},
			Target:      &v1alpha1.Target{PlainHTTP: true},
			Delivery:    &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}},
		},
	}
}

// waitDelivered waits for the pushed Claim's Delivered=False with reason,
// and checks that it is not Ready.
func waitDelivered(t *testing.T, c *v1alpha1.Claim, reason string, texts ...string) {
	t.Helper()
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		d := condition(&c.Status.PipelineStatus, v1alpha1.ConditionDelivered)
		g.Expect(d).NotTo(BeNil(), "conditions %+v", c.Status.Conditions)
		g.Expect(d.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(d.Reason).To(Equal(reason), d.Message)
		for _, text := range texts {
			g.Expect(d.Message).To(ContainSubstring(text))
		}
		g.Expect(isTrue(&c.Status.PipelineStatus, "Ready")).To(BeFalse())
	}).Should(Succeed(), "logs in %s", logsHint())
}

// Issue 21 item 1, with the real kustomize-controller: a Claim named like
// a platform's Kustomization does not take it over. The platform's object
// keeps its spec, its owner and its life when the Claim goes.
func TestClaimDeliveryNeverAdoptsFluxObjects(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tpl := codeServerTemplate(t, "never-adopt-"+ns)
	deployer(t, ns)
	platform := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "ide", Namespace: ns}, Spec: kustomizev1.KustomizationSpec{
		SourceRef:          kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "platform-src"},
		Path:               "./platform",
		Interval:           metav1.Duration{Duration: time.Hour},
		Prune:              true,
		ServiceAccountName: "deployer",
	}}
	create(t, platform)
	key := client.ObjectKeyFromObject(platform)
	g := NewWithT(t)
	g.Expect(sb.Client.Get(ctx, key, platform)).To(Succeed())

	c := deliveredCodeServer("ide", ns, tpl.Name)
	create(t, c)
	waitDelivered(t, c, delivery.ReasonDeliveryConflict, "Kustomization "+ns+"/ide already exists and is not controlled by this Claim")
	now := &kustomizev1.Kustomization{}
	g.Expect(sb.Client.Get(ctx, key, now)).To(Succeed())
	g.Expect(now.Generation).To(Equal(platform.Generation), "the platform's Kustomization was written")
	g.Expect(now.Spec.SourceRef.Name).To(Equal("platform-src"))
	g.Expect(now.Spec.Path).To(Equal("./platform"))
	g.Expect(now.OwnerReferences).To(BeEmpty())

	// The Claim goes; the platform's Kustomization stays.
	g.Expect(sb.Client.Delete(ctx, c)).To(Succeed())
	waitFor(t, func(g Gomega) {
		err := sb.Client.Get(ctx, client.ObjectKeyFromObject(c), &v1alpha1.Claim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	}).Should(Succeed(), "logs in %s", logsHint())
	g.Expect(sb.Client.Get(ctx, key, now)).To(Succeed())
	g.Expect(now.DeletionTimestamp).To(BeNil())
	g.Expect(now.Generation).To(Equal(platform.Generation))
}

// Issue 26 item 3, with the real source-controller: an unsigned Claim that
// asks Flux to verify with its own verifySecretRef was applied unverified
// (the field was dropped); a missing key Secret was reported nowhere. Now
// Flux verifies with that Secret, and the Claim names the field.
func TestClaimDeliveryVerification(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tpl := codeServerTemplate(t, "verify-"+ns)
	deployer(t, ns)
	cosignSecret(t, ns, "team-key")

	unsigned := deliveredCodeServer("unsigned", ns, tpl.Name)
	unsigned.Spec.Delivery.Flux.VerifySecretRef = &corev1.LocalObjectReference{Name: "team-key"}
	create(t, unsigned)
	missing := deliveredCodeServer("missing-key", ns, tpl.Name)
	missing.Spec.Delivery.Flux.VerifySecretRef = &corev1.LocalObjectReference{Name: "absent"}
	create(t, missing)

	waitDelivered(t, unsigned, delivery.ReasonVerificationFailed, "spec.delivery.flux.verifySecretRef: Flux cannot verify", `Secret "team-key"`)
	waitDelivered(t, missing, delivery.ReasonVerificationFailed, "spec.delivery.flux.verifySecretRef", `"absent"`)
	repo := &sourcev1.OCIRepository{}
	g := NewWithT(t)
	g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(unsigned), repo)).To(Succeed())
	g.Expect(repo.Spec.Verify).NotTo(BeNil())
	g.Expect(repo.Spec.Verify.SecretRef.Name).To(Equal("team-key"))
	g.Expect(repo.Status.Artifact).To(BeNil(), "Flux took an unverified artifact")
}
