package controllers_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/test/testenv"
	"github.com/packline/packline/test/wrappers"
)

const otherDigest = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// installFlux installs Flux's CRDs (the real ones, from the modules the
// sandbox builds Flux from) for one test, and removes them after it, so
// TestClaimDeliveryWithoutFlux sees a cluster without Flux whatever the order.
func installFlux(t *testing.T) {
	t.Helper()
	dir, err := testenv.FluxDir()
	if err != nil {
		t.Fatal(err)
	}
	opts := envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "crds")}, ErrorIfPathMissing: true}
	crds, err := envtest.InstallCRDs(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		opts.CRDs = crds
		if err := envtest.UninstallCRDs(env.Config, opts); err != nil {
			t.Errorf("uninstalling Flux CRDs: %v", err)
		}
		eventually(t, func(g Gomega) {
			for _, crd := range crds {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
				err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(crd), u)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CRD %s still there: %v", crd.Name, err)
			}
		})
	})
}

// TestClaimDelivery plays Flux against the real CRDs: a delivered Claim gets
// an OCIRepository pinned to its digest and a Kustomization applying it as
// the named ServiceAccount, both owned by the Claim; it is Ready only once
// Flux reports the digest applied; another applied revision is Drifted.
// Its requester (sealed, as the webhook would) may impersonate the
// ServiceAccount.
func TestClaimDelivery(t *testing.T) {
	installFlux(t)
	startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(testSealer)})
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	c := wrappers.MakeClaim(key.Name, ns, ns+"-tpl").Obj()
	c.Spec.Delivery = &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer",
		Timeout: &metav1.Duration{Duration: 2 * time.Minute}}}
	create(t, sealAs(t, c, "platform-admin", "system:masters"))
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))

	g := NewWithT(t)
	repo, ks := &sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, repo)).To(Succeed())
		g.Expect(env.Client.Get(context.Background(), key, ks)).To(Succeed())
		c := getClaim(g, key)
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		ready := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "Ready before Flux applied the digest")
		g.Expect(ready.Reason).To(Equal(delivery.ReasonDelivering))
		// The Step column: pushed, waiting for Flux.
		g.Expect(c.Status.Progress).NotTo(BeNil())
		g.Expect(c.Status.Progress.Step).To(Equal(v1alpha1.StepDeliver))
	})
	g.Expect(repo.Spec.URL).To(Equal("oci://registry.example.com/acme/tiny"))
	g.Expect(repo.Spec.Reference.Digest).To(Equal(digest))
	g.Expect(repo.OwnerReferences).To(ConsistOf(HaveField("Name", key.Name)))
	g.Expect(ks.Spec.ServiceAccountName).To(Equal("deployer"))
	g.Expect(ks.Spec.SourceRef.Name).To(Equal(repo.Name))
	g.Expect(ks.Spec.TargetNamespace).To(Equal(ns))
	g.Expect(ks.Spec.Prune).To(BeTrue())
	g.Expect(ks.Spec.Timeout.Duration).To(Equal(2 * time.Minute))
	g.Expect(ks.OwnerReferences).To(ConsistOf(HaveField("Name", key.Name)))

	fluxReports := func(status metav1.ConditionStatus, reason, applied string) {
		eventually(t, func(g Gomega) {
			cur := &kustomizev1.Kustomization{}
			g.Expect(env.Client.Get(context.Background(), key, cur)).To(Succeed())
			cur.Status.LastAppliedRevision = applied
			apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: status,
				Reason: reason, Message: "Flux says " + reason, ObservedGeneration: cur.Generation})
			g.Expect(env.Client.Status().Update(context.Background(), cur)).To(Succeed())
		})
	}
	fluxReports(metav1.ConditionFalse, "HealthCheckFailed", digest)
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		delivered := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDelivered)
		g.Expect(delivered.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(delivered.Reason).To(Equal("HealthCheckFailed"))
		g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady).Message).To(ContainSubstring("Flux says HealthCheckFailed"))
	})
	fluxReports(metav1.ConditionTrue, "ReconciliationSucceeded", digest)
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
		g.Expect(apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionDelivered)).To(BeTrue())
		g.Expect(c.Status.Delivery).NotTo(BeNil())
		g.Expect(c.Status.Delivery.LastAppliedRevision).To(Equal(digest))
		g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDrifted)).To(BeNil())
		g.Expect(c.Status.Progress).To(BeNil(), "a delivered Claim keeps no step")
	})
	fluxReports(metav1.ConditionTrue, "ReconciliationSucceeded", otherDigest)
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionDrifted)).To(BeTrue())
		g.Expect(apimeta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady)).To(BeFalse())
	})
}

// TestClaimDeliveryRequiresServiceAccount: a profile that requires a tenant
// identity for Flux refuses a Claim that names none, naming the field.
func TestClaimDeliveryRequiresServiceAccount(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	labelNamespace(t, ns, map[string]string{"delivery": ns})
	create(t, &v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: ns + "-deliver"}, Spec: v1alpha1.EnvironmentProfileSpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"delivery": ns}},
		Delivery:          &v1alpha1.ProfileDelivery{Flux: &v1alpha1.FluxDelivery{}, RequireServiceAccount: true}}})
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	key := client.ObjectKey{Namespace: ns, Name: "anon"}
	create(t, wrappers.MakeClaim(key.Name, ns, ns+"-tpl").Obj())
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		stalled := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(delivery.ReasonServiceAccountRequired))
		g.Expect(stalled.Message).To(ContainSubstring("spec.delivery.flux.serviceAccountName"))
	})
	NewWithT(t).Expect(jobsOf(NewWithT(t), ns, key.Name)).To(BeEmpty())
}

// TestClaimDeliveryWithoutFlux: without the Flux CRDs, a delivered Claim
// stalls with FluxNotInstalled naming them, and the manager keeps running.
func TestClaimDeliveryWithoutFlux(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	key := client.ObjectKey{Namespace: ns, Name: "no-flux"}
	c := wrappers.MakeClaim(key.Name, ns, ns+"-tpl").Obj()
	c.Spec.Delivery = &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{}}
	create(t, c)
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		stalled := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(delivery.ReasonFluxNotInstalled))
		g.Expect(stalled.Message).To(ContainSubstring("kustomizations.kustomize.toolkit.fluxcd.io"))
	})
	// Still reconciling: another Claim runs.
	create(t, wrappers.MakeClaim("after", ns, ns+"-tpl").Obj())
	waitJob(t, ns, "after", 1, 1)
}

// labelNamespace sets a namespace's labels, as the platform would.
func labelNamespace(t *testing.T, ns string, l map[string]string) {
	t.Helper()
	eventually(t, func(g Gomega) {
		n := &corev1.Namespace{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, n)).To(Succeed())
		n.Labels = l
		g.Expect(env.Client.Update(context.Background(), n)).To(Succeed())
	})
}
