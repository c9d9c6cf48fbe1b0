package admission_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// managerNamespace makes the namespace the managers publish their instance
// Leases in, as the install does.
func managerNamespace(t *testing.T) string {
	t.Helper()
	ns := pipeline.ManagerNamespace()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return ns
}

// TestInstanceLabel: an empty packline.dev/instance label is the default
// instance's (removed at admission, then reconciled by the default
// manager); a label naming an instance no manager runs is admitted with a
// warning that says so, on create and on a label edit; one a running
// manager publishes is admitted silently.
func TestInstanceLabel(t *testing.T) {
	mgrNS := managerNamespace(t)
	startManager(t, true)
	ns := tenantNamespace(t)
	grant(t, ns, "alice", writeClaims())
	ctx := context.Background()
	lease := func(g Gomega, instance string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: mgrNS, Name: pipeline.InstanceLeaseName(instance)}, l)).To(Succeed())
		return l
	}
	// The default manager publishes itself.
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(lease(g, "").Spec.RenewTime).NotTo(BeNil())
	}).WithTimeout(20 * time.Second).Should(Succeed())

	t.Run("empty is the default instance", func(t *testing.T) {
		alice := as(t, "alice")
		a := wrappers.MakeArtifact("empty", ns).Label(pipeline.LabelInstance, "").Obj()
		NewWithT(t).Expect(alice.Create(ctx, a)).To(Succeed())
		NewWithT(t).Expect(alice.warnings.all()).To(ContainSubstring("metadata.labels[packline.dev/instance]: an empty value means the default instance; the label was removed"))
		NewWithT(t).Eventually(func(g Gomega) {
			got := &v1alpha1.Artifact{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
			g.Expect(got.Labels).NotTo(HaveKey(pipeline.LabelInstance))
			g.Expect(got.Status.Phase).NotTo(BeEmpty(), "the default manager never reconciled it")
		}).WithTimeout(20 * time.Second).Should(Succeed())
	})

	t.Run("an instance no manager runs", func(t *testing.T) {
		alice := as(t, "alice")
		a := wrappers.MakeArtifact("nobody", ns).Label(pipeline.LabelInstance, "nobody").Obj()
		NewWithT(t).Expect(alice.Create(ctx, a)).To(Succeed())
		NewWithT(t).Expect(alice.warnings.all()).To(ContainSubstring(
			`metadata.labels[packline.dev/instance]: no packline manager runs instance "nobody", so nothing will reconcile this Artifact until one is started with --instance=nobody, or the label is changed`))
	})

	t.Run("a label edit to an instance no manager runs", func(t *testing.T) {
		alice := as(t, "alice")
		a := wrappers.MakeArtifact("moved", ns).Obj()
		NewWithT(t).Expect(alice.Create(ctx, a)).To(Succeed())
		NewWithT(t).Expect(alice.warnings.all()).NotTo(ContainSubstring("packline.dev/instance"))
		patch := client.MergeFrom(a.DeepCopy())
		a.Labels = map[string]string{pipeline.LabelInstance: "gone"}
		NewWithT(t).Expect(alice.Patch(ctx, a, patch)).To(Succeed())
		NewWithT(t).Expect(alice.warnings.all()).To(ContainSubstring(`no packline manager runs instance "gone"`))
	})

	t.Run("a running instance", func(t *testing.T) {
		pubCtx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		pub := &pipeline.InstancePublisher{Client: env.Client, Reader: env.Client, Namespace: mgrNS, Instance: "blue"}
		go func() { _ = pub.Start(pubCtx) }()
		NewWithT(t).Eventually(func(g Gomega) { g.Expect(lease(g, "blue").Labels).To(HaveKeyWithValue(pipeline.LabelInstance, "blue")) }).
			WithTimeout(20 * time.Second).Should(Succeed())
		alice := as(t, "alice")
		a := wrappers.MakeArtifact("blue", ns).Label(pipeline.LabelInstance, "blue").Obj()
		NewWithT(t).Expect(alice.Create(ctx, a)).To(Succeed())
		NewWithT(t).Expect(alice.warnings.all()).NotTo(ContainSubstring("packline.dev/instance"))
	})
}
