package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/test/wrappers"
)

// The controller renders a Claim of a restricted template only for a
// requester whose seal verifies and who holds the rights; without the
// webhook (no sealer) or with a forged requester it stalls instead.
func TestClaimEntitlementFailsClosed(t *testing.T) {
	key := []byte("test-seal-key")
	sealer := entitlement.NewSealer(key)
	// The API's default: the claim verb is required.
	restricted := func(name string) *v1alpha1.ClaimTemplate { return wrappers.MakeClaimTemplate(name).Obj() }
	// sealed seals c as the webhook would: it sees the spec after the API
	// server applied the CRD's defaults.
	sealed := func(c *v1alpha1.Claim, user string) *v1alpha1.Claim {
		c.Spec.Exposure.Type = v1alpha1.ExposureClusterIP
		c.Spec.DeletionPolicy = v1alpha1.DeletionOrphan
		ann, err := sealer.Seal("Claim", c, c.Spec, entitlement.Requester{Username: user}, entitlement.BindCreation(c, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		c.Annotations = ann
		return c
	}
	stalledWith := func(ns, name, reason, text string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			c := getClaim(g, client.ObjectKey{Namespace: ns, Name: name})
			st := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionStalled)
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.Reason).To(Equal(reason))
			g.Expect(st.Message).To(ContainSubstring(text))
			g.Expect(jobsOf(g, ns, name)).To(BeEmpty())
		})
	}

	t.Run("webhooks off, restricted template", func(t *testing.T) {
		startManager(t)
		ns := newNamespace(t)
		create(t, restricted(ns+"-tpl"))
		create(t, wrappers.MakeClaim("c", ns, ns+"-tpl").Obj())
		stalledWith(ns, "c", controllers.ReasonEntitlementUnverified, "--enable-webhooks=false")
	})
	t.Run("webhooks off, open template renders", func(t *testing.T) {
		startManager(t)
		ns := newNamespace(t)
		create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
		create(t, wrappers.MakeClaim("c", ns, ns+"-tpl").Obj())
		waitJob(t, ns, "c", 1, 1)
	})
	t.Run("forged requester", func(t *testing.T) {
		startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(sealer)})
		ns := newNamespace(t)
		create(t, restricted(ns+"-tpl"))
		c := wrappers.MakeClaim("c", ns, ns+"-tpl").Obj()
		c.Annotations = map[string]string{v1alpha1.AnnotationRequester: `{"username":"system:admin"}`, v1alpha1.AnnotationRequesterSeal: "forged"}
		create(t, c)
		stalledWith(ns, "c", controllers.ReasonEntitlementUnverified, "was not written by this installation's admission webhook")
	})
	t.Run("seal copied to another spec", func(t *testing.T) {
		startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(sealer)})
		ns := newNamespace(t)
		create(t, restricted(ns+"-tpl"))
		c := sealed(wrappers.MakeClaim("c", ns, ns+"-tpl").Values(`{"replicas":1}`).Obj(), "system:admin")
		c.Spec.Values.Raw = []byte(`{"replicas":3}`)
		create(t, c)
		stalledWith(ns, "c", controllers.ReasonEntitlementUnverified, "the seal does not match")
	})
	t.Run("sealed requester without rights, then granted", func(t *testing.T) {
		startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(sealer)})
		ns := newNamespace(t)
		tpl := restricted(ns + "-tpl")
		create(t, tpl)
		create(t, sealed(wrappers.MakeClaim("c", ns, tpl.Name).Obj(), "mallory"))
		stalledWith(ns, "c", controllers.ReasonEntitlementDenied, `"claim" on claimtemplates.packline.dev named "`+tpl.Name+`"`)

		// The admin grants the rights; the Claim renders with no edit.
		grantClaimer(t, ns, "mallory", tpl.Name)
		waitJob(t, ns, "c", 1, 1)
	})
	t.Run("template adds a group the requester is not in", func(t *testing.T) {
		startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(sealer)})
		ns := newNamespace(t)
		tpl := wrappers.MakeClaimTemplate(ns + "-tpl").Open().Obj() // open: no claim verb needed
		create(t, tpl)
		grantClaimer(t, ns, "mallory", tpl.Name)
		create(t, sealed(wrappers.MakeClaim("c", ns, tpl.Name).Obj(), "mallory"))
		waitJob(t, ns, "c", 1, 1)
		eventually(t, func(g Gomega) {
			got := &v1alpha1.ClaimTemplate{}
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(tpl), got)).To(Succeed())
			got.Spec.Access.Groups = []string{"platform-admins"}
			g.Expect(env.Client.Update(context.Background(), got)).To(Succeed())
		})
		stalledWith(ns, "c", controllers.ReasonEntitlementDenied, "spec.access.groups (platform-admins)")
	})
}

// grantClaimer gives user what claiming tpl (the code-server fixture) needs in ns.
func grantClaimer(t *testing.T, ns, user, tpl string) {
	t.Helper()
	create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "claimer", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"packline.dev"}, Resources: []string{"claimtemplates"}, Verbs: []string{"claim"}, ResourceNames: []string{tpl}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create"}},
	}})
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claimer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "claimer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
}
