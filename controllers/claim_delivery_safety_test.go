package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/test/wrappers"
)

// testSealer seals requesters as the admission webhook would.
var testSealer = entitlement.NewSealer([]byte("test-seal-key"))

// sealAs records user (in groups) as c's requester, as the webhook would:
// it sees the spec after the API server applied the CRD's defaults.
func sealAs(t *testing.T, c *v1alpha1.Claim, user string, groups ...string) *v1alpha1.Claim {
	t.Helper()
	c.Spec.Exposure.Type = v1alpha1.ExposureClusterIP
	c.Spec.DeletionPolicy = v1alpha1.DeletionOrphan
	ann, err := testSealer.Seal("Claim", c, c.Spec, entitlement.Requester{Username: user, Groups: groups}, entitlement.BindCreation(c, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	c.Annotations = ann
	return c
}

// deliveredClaim is an open-template Claim delivered by Flux as sa.
func deliveredClaim(name, ns, tpl, sa string) *v1alpha1.Claim {
	c := wrappers.MakeClaim(name, ns, tpl).Obj()
	c.Spec.Delivery = &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: sa}}
	return c
}

// stalledDelivery waits for the Claim to show Delivered=False, Stalled and
// Ready=False with reason, each message holding every text.
func stalledDelivery(t *testing.T, key client.ObjectKey, reason string, texts ...string) {
	t.Helper()
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		for _, typ := range []string{v1alpha1.ConditionDelivered, v1alpha1.ConditionStalled, v1alpha1.ConditionReady} {
			cond := apimeta.FindStatusCondition(c.Status.Conditions, typ)
			g.Expect(cond).NotTo(BeNil(), "no %s condition: %+v", typ, c.Status.Conditions)
			g.Expect(cond.Reason).To(Equal(reason), "%s: %s", typ, cond.Message)
			for _, text := range texts {
				g.Expect(cond.Message).To(ContainSubstring(text), typ)
			}
		}
		g.Expect(apimeta.IsStatusConditionFalse(c.Status.Conditions, v1alpha1.ConditionDelivered)).To(BeTrue())
		g.Expect(apimeta.IsStatusConditionFalse(c.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue())
	})
}

// Issue 21 item 1: a Claim named like a platform's Kustomization took it
// over (re-pointed it, owned it, and deleted it with delivery off). Now
// the Claim stalls with DeliveryConflict and the platform's object is
// neither modified nor deleted, whatever the tenant writes in status.
func TestClaimDeliveryNeverAdopts(t *testing.T) {
	installFlux(t)
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	platform := func(name string) *kustomizev1.Kustomization {
		return &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: kustomizev1.KustomizationSpec{
			SourceRef:          kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: "platform", Namespace: "flux-system"},
			Path:               "./platform/" + name,
			Interval:           metav1.Duration{Duration: time.Hour},
			Prune:              true,
			ServiceAccountName: "flux-admin",
			TargetNamespace:    "kube-system",
		}}
	}
	for _, name := range []string{"web", "platform-apps"} {
		create(t, platform(name))
	}
	read := func(g Gomega, name string) *kustomizev1.Kustomization {
		k := &kustomizev1.Kustomization{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, k)).To(Succeed(), "the platform's Kustomization %s is gone", name)
		return k
	}
	before := map[string]*kustomizev1.Kustomization{}
	for _, name := range []string{"web", "platform-apps"} {
		before[name] = read(NewWithT(t), name)
	}
	untouched := func(g Gomega) {
		for name, b := range before {
			now := read(g, name)
			g.Expect(now.ResourceVersion).To(Equal(b.ResourceVersion), "the platform's Kustomization %s was written: %s", name, cmp.Diff(b.Spec, now.Spec))
			g.Expect(now.OwnerReferences).To(BeEmpty())
		}
	}

	key := client.ObjectKey{Namespace: ns, Name: "web"}
	create(t, deliveredClaim(key.Name, ns, ns+"-tpl", ""))
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
	stalledDelivery(t, key, delivery.ReasonDeliveryConflict,
		"Kustomization "+ns+"/web already exists and is not controlled by this Claim (it has no controller)", "never adopts")
	untouched(NewWithT(t))

	// The tenant points status at the other object (status is theirs to
	// write), then turns delivery off: only what the Claim controls goes.
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		c.Status.Delivery = &v1alpha1.DeliveryStatus{Kustomization: "platform-apps", OCIRepository: "platform-apps"}
		g.Expect(env.Client.Status().Update(context.Background(), c)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		c.Spec.Delivery = nil
		g.Expect(env.Client.Update(context.Background(), c)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(c.Status.Delivery).To(BeNil())
		g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDelivered)).To(BeNil())
		// The Claim's own OCIRepository (created before the conflict) goes.
		err := env.Client.Get(context.Background(), key, &sourcev1.OCIRepository{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Claim's own OCIRepository is left: %v", err)
	})
	untouched(NewWithT(t))
}

// Issue 26 item 6: a Flux object the API server refuses left the Claim
// Ready=True "pushed" with no Delivered condition, retried in a hot loop.
// Now it stalls with DeliveryRejected, naming the field.
func TestClaimDeliveryRejected(t *testing.T) {
	installFlux(t)
	startManager(t)

	t.Run("Flux's schema refuses the interval", func(t *testing.T) {
		ns := newNamespace(t)
		create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
		key := client.ObjectKey{Namespace: ns, Name: "negative"}
		c := deliveredClaim(key.Name, ns, ns+"-tpl", "")
		c.Spec.Delivery.Flux.Interval = &metav1.Duration{Duration: -5 * time.Minute}
		if err := env.Client.Create(context.Background(), c); err != nil {
			// Refused by packline's own schema is as good: it names the field.
			NewWithT(t).Expect(err.Error()).To(ContainSubstring("spec.delivery.flux.interval"))
			return
		}
		runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
		stalledDelivery(t, key, delivery.ReasonDeliveryRejected, "spec.delivery.flux.interval: the API server refused", `"-5m0s"`)
		err := env.Client.Get(context.Background(), key, &sourcev1.OCIRepository{})
		NewWithT(t).Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	t.Run("an admission policy refuses the Kustomization", func(t *testing.T) {
		ns := newNamespace(t)
		refuseKustomizations(t, ns)
		create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
		key := client.ObjectKey{Namespace: ns, Name: "policy"}
		create(t, deliveredClaim(key.Name, ns, ns+"-tpl", ""))
		runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
		stalledDelivery(t, key, delivery.ReasonDeliveryRejected, "the API server refused the Flux objects of this Claim", "no Kustomizations here")
	})
}

// refuseKustomizations installs a ValidatingAdmissionPolicy that refuses
// every Kustomization in ns, as a platform's policy would, and waits until
// the API server enforces it.
func refuseKustomizations(t *testing.T, ns string) {
	t.Helper()
	forbidden := metav1.StatusReasonForbidden
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-no-flux"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{kustomizev1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"kustomizations"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "platform policy: no Kustomizations here", Reason: &forbidden}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-no-flux"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	for _, o := range []client.Object{policy, binding} {
		create(t, o)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	probe := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Spec: kustomizev1.KustomizationSpec{
		SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "probe"},
		Interval:  metav1.Duration{Duration: time.Minute}, Prune: true}}
	eventually(t, func(g Gomega) {
		err := env.Client.Create(context.Background(), probe.DeepCopy(), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "policy not enforced yet: %v", err)
	})
}

// Issue 26 item 7: with the Kustomization CRD deleted while the manager
// ran, a delivered Claim went Ready=True with no Delivered condition.
func TestClaimDeliveryFluxRemoved(t *testing.T) {
	installFlux(t)
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	// A first Claim is delivered: the manager runs, watching Flux.
	first := client.ObjectKey{Namespace: ns, Name: "before"}
	create(t, deliveredClaim(first.Name, ns, ns+"-tpl", ""))
	runJob(t, waitJob(t, ns, first.Name, 1, 1), 0, okResult(digest))
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), first, &kustomizev1.Kustomization{})).To(Succeed())
	})

	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	crd.SetName("kustomizations.kustomize.toolkit.fluxcd.io")
	NewWithT(t).Expect(env.Client.Delete(context.Background(), crd)).To(Succeed())
	eventually(t, func(g Gomega) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(crd), crd.DeepCopy())
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CRD still there: %v", err)
	})
	key := client.ObjectKey{Namespace: ns, Name: "removed"}
	create(t, deliveredClaim(key.Name, ns, ns+"-tpl", ""))
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
	stalledDelivery(t, key, delivery.ReasonFluxNotInstalled, "kustomizations.kustomize.toolkit.fluxcd.io")
}

// Issue 21 item 3: the ServiceAccount a Claim names for Flux is an
// entitlement, checked again before the manager applies the Flux objects,
// for the requester the webhook sealed; without the webhook it cannot be
// verified and nothing is applied.
func TestClaimDeliveryServiceAccountEntitled(t *testing.T) {
	installFlux(t)
	sealed := func(c *v1alpha1.Claim, user string) *v1alpha1.Claim { return sealAs(t, c, user) }
	noFluxObjects := func(g Gomega, key client.ObjectKey) {
		for _, o := range []client.Object{&sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}} {
			err := env.Client.Get(context.Background(), key, o)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T applied: %v", o, err)
		}
	}

	t.Run("revoked before apply", func(t *testing.T) {
		startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(testSealer), controllers.WithEntitlementCacheTTL(0)})
		ns := newNamespace(t)
		create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
		rules := []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create", "patch", "delete"}},
		}
		impersonate := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"deployer"}}
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deliverer", Namespace: ns}, Rules: append(rules, impersonate)}
		create(t, role)
		create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deliverer", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "mallory"}}})
		setRules := func(r []rbacv1.PolicyRule) {
			eventually(t, func(g Gomega) {
				cur := &rbacv1.Role{}
				g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(role), cur)).To(Succeed())
				cur.Rules = r
				g.Expect(env.Client.Update(context.Background(), cur)).To(Succeed())
			})
		}
		key := client.ObjectKey{Namespace: ns, Name: "web"}
		create(t, sealed(deliveredClaim(key.Name, ns, ns+"-tpl", "deployer"), "mallory"))
		job := waitJob(t, ns, key.Name, 1, 1) // entitled when the render started

		setRules(rules) // impersonate revoked while it runs
		runJob(t, job, 0, okResult(digest))
		stalledDelivery(t, key, controllers.ReasonEntitlementDenied,
			`spec.delivery.flux.serviceAccountName: delivering as ServiceAccount deployer (Flux applies as it) needs "impersonate" on serviceaccounts named "deployer" in namespace `+ns)
		noFluxObjects(NewWithT(t), key)

		setRules(append(rules, impersonate)) // granted again: delivered
		eventually(t, func(g Gomega) {
			k := &kustomizev1.Kustomization{}
			g.Expect(env.Client.Get(context.Background(), key, k)).To(Succeed())
			g.Expect(k.Spec.ServiceAccountName).To(Equal("deployer"))
			c := getClaim(g, key)
			g.Expect(metav1.IsControlledBy(k, c)).To(BeTrue())
		})
	})

	t.Run("webhooks off", func(t *testing.T) {
		startManager(t)
		ns := newNamespace(t)
		create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
		key := client.ObjectKey{Namespace: ns, Name: "web"}
		create(t, deliveredClaim(key.Name, ns, ns+"-tpl", "namespace-admin"))
		runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
		stalledDelivery(t, key, controllers.ReasonEntitlementUnverified, "spec.delivery.flux.serviceAccountName", "--enable-webhooks=false")
		noFluxObjects(NewWithT(t), key)
	})
}

// The Flux objects are applied server-side as packline-delivery: a field
// the plan drops (the verification key) is removed, and a field another
// manager set on them is left alone.
func TestClaimDeliveryOwnsItsFields(t *testing.T) {
	installFlux(t)
	startManager(t)
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	c := deliveredClaim(key.Name, ns, ns+"-tpl", "")
	c.Spec.Delivery.Flux.VerifySecretRef = &corev1.LocalObjectReference{Name: "team-pub"}
	create(t, c)
	runJob(t, waitJob(t, ns, key.Name, 1, 1), 0, okResult(digest))
	repo := &sourcev1.OCIRepository{}
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, repo)).To(Succeed())
		// Issue 26 item 3: the Claim's own verifySecretRef reaches Flux.
		g.Expect(repo.Spec.Verify).NotTo(BeNil())
		g.Expect(repo.Spec.Verify.SecretRef.Name).To(Equal("team-pub"))
		managers := []string{}
		for _, m := range repo.ManagedFields {
			managers = append(managers, m.Manager+"/"+string(m.Operation))
		}
		g.Expect(managers).To(ContainElement(controllers.DeliveryFieldManager + "/Apply"))
		g.Expect(strings.Join(managers, ",")).NotTo(ContainSubstring(controllers.DeliveryFieldManager + "/Update"))
	})
	// Someone else sets a field packline does not own.
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, repo)).To(Succeed())
		repo.Spec.Suspend = true
		g.Expect(env.Client.Update(context.Background(), repo, client.FieldOwner("someone"))).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		c.Spec.Delivery.Flux.VerifySecretRef = nil
		g.Expect(env.Client.Update(context.Background(), c)).To(Succeed())
	})
	runJob(t, waitJob(t, ns, key.Name, 2, 1), 0, okResult(digest))
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, repo)).To(Succeed())
		g.Expect(repo.Spec.Verify).To(BeNil(), "a dropped verifySecretRef stays on the OCIRepository")
		g.Expect(repo.Spec.Suspend).To(BeTrue(), "another manager's field was reset")
	})
}

// TestClaimDeliveryIgnoresForgedDigest: whoever may write claims/status
// can set status.digest and status.reference, but Flux, which applies as
// the delivery identity, is never re-pointed at a digest the manager did
// not read from its own worker (status.pushSeal): the OCIRepository keeps
// the pushed digest, and the Claim says why it does not deliver.
func TestClaimDeliveryIgnoresForgedDigest(t *testing.T) {
	installFlux(t)
	startManagerWith(t, []controllers.Option{controllers.WithRequesterSealer(testSealer)})
	ns := newNamespace(t)
	create(t, wrappers.MakeClaimTemplate(ns+"-tpl").Open().Obj())
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	create(t, sealAs(t, deliveredClaim(key.Name, ns, ns+"-tpl", ""), "platform-admin", "system:masters"))
	job := waitJob(t, ns, key.Name, 1, 1)
	runJob(t, job, 0, okResult(digest))
	repo := &sourcev1.OCIRepository{}
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, repo)).To(Succeed())
		g.Expect(repo.Spec.Reference.Digest).To(Equal(digest))
	})
	// The TTL controller deletes the Job and its pods: from then on status
	// is all that says what was pushed.
	NewWithT(t).Expect(env.Client.Delete(context.Background(), job)).To(Succeed())
	var pods corev1.PodList
	NewWithT(t).Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	for i := range pods.Items {
		NewWithT(t).Expect(env.Client.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0))).To(Succeed())
	}
	eventually(t, func(g Gomega) { g.Expect(jobsOf(g, ns, key.Name)).To(BeEmpty()) })

	// A reconcile already under way may patch status once more from the
	// Job it last saw, so the forgery is written again until it holds.
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		if c.Status.Digest != otherDigest {
			c.Status.Digest = otherDigest
			c.Status.Reference = "registry.example.com/evil/app@" + otherDigest
			g.Expect(env.Client.Status().Update(context.Background(), c)).To(Succeed())
			// A status write alone wakes no reconcile (the Claim's watch
			// passes spec and annotation changes); any later event would.
			c = getClaim(g, key)
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations["test.packline.dev/nudge"] = time.Now().String()
			g.Expect(env.Client.Update(context.Background(), c)).To(Succeed())
			c = getClaim(g, key)
		}
		delivered := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionDelivered)
		g.Expect(delivered).NotTo(BeNil())
		g.Expect(delivered.Reason).To(Equal(delivery.ReasonDigestUnrecorded))
	})
	stalledDelivery(t, key, delivery.ReasonDigestUnrecorded, "status.digest "+otherDigest+" was not recorded by this manager")
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, repo)).To(Succeed())
		g.Expect(repo.Spec.Reference.Digest).To(Equal(digest), "Flux was pointed at a forged digest")
		g.Expect(repo.Spec.URL).To(Equal("oci://registry.example.com/acme/tiny"))
	}).WithTimeout(2 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}
