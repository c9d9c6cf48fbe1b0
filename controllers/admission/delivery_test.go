package admission_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/wrappers"
)

// Issue 21: the delivery identity is an entitlement. Naming the
// ServiceAccount Flux applies as needs impersonate on it; a delivered Claim
// needs patch and delete on what it renders (Flux applies with force and
// prunes); an RBAC kind needs bind and escalate; a profile may pin the
// ServiceAccount.
func TestClaimDeliveryAdmission(t *testing.T) {
	startManager(t, true)
	ns := tenantNamespace(t)
	tpl := wrappers.MakeClaimTemplate("deliver-" + ns).ForNamespaces(tenantLabels).Obj()
	createTemplate(t, tpl)
	rbacTpl := wrappers.MakeClaimTemplate("rbac-" + ns).ForNamespaces(tenantLabels).
		Kinds(v1alpha1.RenderedKind{Group: rbacv1.GroupName, Kind: "RoleBinding"}).Obj()
	createTemplate(t, rbacTpl)

	manageKinds := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create", "patch", "delete"}},
	}
	impersonate := func(sa string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}, ResourceNames: []string{sa}}
	}
	// alice may create what the template renders, nothing more.
	entitled(t, ns, "alice", tpl.Name)
	// gina may manage it and act as "deployer".
	grant(t, ns, "gina", append([]rbacv1.PolicyRule{writeClaims(), claimVerb(tpl.Name), impersonate("deployer")}, manageKinds...)...)
	// hank may create RoleBindings, and no more.
	grant(t, ns, "hank", writeClaims(), claimVerb(rbacTpl.Name),
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}})
	// ivy may also bind and escalate.
	grant(t, ns, "ivy", writeClaims(), claimVerb(rbacTpl.Name),
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "clusterroles"}, Verbs: []string{"bind", "escalate"}})

	delivered := func(name, tplName, sa string) *v1alpha1.Claim {
		c := wrappers.MakeClaim(name, ns, tplName).Obj()
		c.Spec.Delivery = &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: sa}}
		return c
	}
	cases := []struct {
		name  string
		by    string
		claim *v1alpha1.Claim
		deny  []string
	}{
		{name: "service account without impersonate", by: "alice", claim: delivered("as-admin", tpl.Name, "namespace-admin"),
			deny: []string{`spec.delivery.flux.serviceAccountName: delivering as ServiceAccount namespace-admin (Flux applies as it) needs "impersonate" on serviceaccounts named "namespace-admin" in namespace ` + ns}},
		{name: "delivered without patch and delete", by: "alice", claim: delivered("no-patch", tpl.Name, ""),
			deny: []string{`renders Deployment.apps needs "patch" on deployments.apps`, `needs "delete" on services`}},
		{name: "service account the user may impersonate", by: "gina", claim: delivered("as-deployer", tpl.Name, "deployer")},
		{name: "another service account", by: "gina", claim: delivered("as-other", tpl.Name, "other"),
			deny: []string{`"impersonate" on serviceaccounts named "other"`}},
		{name: "RBAC kind with create alone", by: "hank", claim: wrappers.MakeClaim("binding", ns, rbacTpl.Name).Obj(),
			deny: []string{`ClaimTemplate ` + rbacTpl.Name + ` renders RoleBinding.rbac.authorization.k8s.io, and granting rights through it needs "bind" on roles.rbac.authorization.k8s.io`,
				`"escalate" on clusterroles.rbac.authorization.k8s.io`}},
		{name: "RBAC kind with bind and escalate", by: "ivy", claim: wrappers.MakeClaim("binding-ok", ns, rbacTpl.Name).Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := as(t, tc.by).Create(context.Background(), tc.claim)
			if len(tc.deny) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			t.Logf("denied: %v", err)
			for _, want := range tc.deny {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}

	t.Run("profile pins the service account", func(t *testing.T) {
		g := NewWithT(t)
		pinned := tenantNamespace(t)
		n := &corev1.Namespace{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: pinned}, n)).To(Succeed())
		n.Labels["pinned"] = pinned
		g.Expect(env.Client.Update(context.Background(), n)).To(Succeed())
		profile := &v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: "pin-" + pinned}, Spec: v1alpha1.EnvironmentProfileSpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pinned": pinned}},
			Delivery: &v1alpha1.ProfileDelivery{PinServiceAccount: true,
				Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant-deployer"}}}}
		g.Expect(env.Client.Create(context.Background(), profile)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), profile) })
		// The profile delivers as its own ServiceAccount: no impersonate.
		grant(t, pinned, "gina", append([]rbacv1.PolicyRule{writeClaims(), claimVerb(tpl.Name), impersonate("admin")}, manageKinds...)...)
		gina := as(t, "gina")
		c := wrappers.MakeClaim("pinned", pinned, tpl.Name).Obj()
		c.Spec.Delivery = &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "admin"}}
		g.Eventually(func(g Gomega) {
			err := gina.Create(context.Background(), c.DeepCopy())
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(`spec.delivery.flux.serviceAccountName: the EnvironmentProfile of namespace ` + pinned + ` pins the ServiceAccount Flux applies as to "tenant-deployer"`))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		g.Expect(gina.Create(context.Background(), wrappers.MakeClaim("by-profile", pinned, tpl.Name).Obj())).To(Succeed())

		// Pinning needs the ServiceAccount it pins.
		err := env.Client.Create(context.Background(), &v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: "pin-nothing-" + pinned},
			Spec: v1alpha1.EnvironmentProfileSpec{Delivery: &v1alpha1.ProfileDelivery{PinServiceAccount: true, Flux: &v1alpha1.FluxDelivery{}}}})
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("pinServiceAccount needs flux.serviceAccountName"))
	})
}
