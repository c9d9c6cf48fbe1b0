package e2e

import (
	"context"
	"fmt"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// A delivered Claim, with the real source-controller and
// kustomize-controller: Flux applies the rendered Deployment, Service and
// Ingress as the tenant's ServiceAccount (which, until granted Ingresses,
// is refused, and the Claim says so), the Claim is Ready only once they
// are applied, a value change rolls out a new digest, and deleting the
// Claim prunes them through Flux.
func TestClaimDeliveredByFlux(t *testing.T) {
	ctx := context.Background()
	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	ns := newNamespace(t)
	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "delivered-" + ns},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:       v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/code-server/base"},
			Kinds:        []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}, {Group: "networking.k8s.io", Kind: "Ingress"}},
			Service:      "code-server",
			ValuesSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"replicas":{"type":"integer","minimum":1,"maximum":3}}}`)},
			Parameters: []v1alpha1.ParameterBinding{{Value: "replicas", Kind: "Replicas",
				Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "code-server"}}},
			Exposures:        []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureIngress, Component: "apps/code-server/components/ingress"}},
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
	create(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })

	// The tenant's deployer may manage Deployments, Services and PVCs, not
	// yet Ingresses.
	role := deployer(t, ns)
	rules := role.Rules

	// Signed with the tenant's own key: Flux verifies the digest with the
	// same Secret's cosign.pub before applying anything.
	kp := cosignSecret(t, ns, "cosign")
	c := &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: "ide", Namespace: ns},
		Spec: v1alpha1.ClaimSpec{
			TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name},
			Values:      &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1}`)},
			Exposure:    v1alpha1.Exposure{Type: v1alpha1.ExposureIngress, Host: "ide.example.com"},
			Target:      &v1alpha1.Target{PlainHTTP: true},
			// No kubelet runs the code-server image here, so Flux applies
			// without waiting for the Deployment to become healthy.
			Delivery: &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}},
		},
	}
	c.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign"}}
	create(t, c)
	key := client.ObjectKeyFromObject(c)
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, key, c)).To(Succeed())
		g.Expect(c.Status.Phase).To(Equal(v1alpha1.PhaseSucceeded))
		d := condition(&c.Status.PipelineStatus, v1alpha1.ConditionDelivered)
		g.Expect(d).NotTo(BeNil())
		g.Expect(d.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(d.Message).To(ContainSubstring("system:serviceaccount:"+ns+":deployer"), "applied as the tenant")
		g.Expect(d.Message).To(ContainSubstring("ingresses"))
		g.Expect(isTrue(&c.Status.PipelineStatus, "Ready")).To(BeFalse())
	}).Should(Succeed(), "logs in %s", logsHint())

	// Granted Ingresses, the deployer applies everything: the Claim is Ready.
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(role), role)).To(Succeed())
		role.Rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"*"}})
		g.Expect(sb.Client.Update(ctx, role)).To(Succeed())
	}).Should(Succeed())
	requestReconcile(t, &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: ns}})
	waitReady(t, c, c.GetPipelineStatus)
	first := c.Status.Digest
	g := NewWithT(t)
	g.Expect(c.Status.Delivery.LastAppliedRevision).To(HaveSuffix(first))
	dep := &appsv1.Deployment{}
	g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "code-server"}, dep)).To(Succeed())
	g.Expect(dep.Labels).To(HaveKeyWithValue("kustomize.toolkit.fluxcd.io/name", c.Name))
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "code-server"}, &corev1.Service{})).To(Succeed())
	g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "code-server"}, &networkingv1.Ingress{})).To(Succeed())
	repoObj := &sourcev1.OCIRepository{}
	g.Expect(sb.Client.Get(ctx, key, repoObj)).To(Succeed())
	g.Expect(repoObj.Spec.Reference.Digest).To(Equal(first), "pinned by digest, never a tag")
	verifySigned(t, kp, &c.Status.PipelineStatus)
	g.Expect(repoObj.Spec.Verify).NotTo(BeNil())
	g.Expect(repoObj.Spec.Verify.SecretRef.Name).To(Equal("cosign"))
	verified := apimeta.FindStatusCondition(repoObj.Status.Conditions, "SourceVerified")
	g.Expect(verified).NotTo(BeNil(), "Flux did not verify the signature: %+v", repoObj.Status.Conditions)
	g.Expect(verified.Status).To(Equal(metav1.ConditionTrue), verified.Message)

	// A value change renders, pushes and rolls out a new digest.
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, key, c)).To(Succeed())
		c.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"replicas":2}`)}
		g.Expect(sb.Client.Update(ctx, c)).To(Succeed())
	}).Should(Succeed())
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, key, c)).To(Succeed())
		g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
		g.Expect(c.Status.Digest).NotTo(Equal(first))
		g.Expect(isTrue(&c.Status.PipelineStatus, "Ready")).To(BeTrue())
		g.Expect(c.Status.Delivery.LastAppliedRevision).To(HaveSuffix(c.Status.Digest))
		g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "code-server"}, dep)).To(Succeed())
		g.Expect(*dep.Spec.Replicas).To(Equal(int32(2)))
	}).Should(Succeed(), "logs in %s", logsHint())

	// Flux writes its objects right after packline creates them; that race
	// is packline's to absorb, not an error a user should read in describe.
	events := &corev1.EventList{}
	g.Expect(sb.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Message).NotTo(ContainSubstring("taking over the fields"), "event %s on %s", e.Reason, e.InvolvedObject.Name)
	}

	// Deleting the Claim deletes its Kustomization, and Flux prunes.
	g.Expect(sb.Client.Delete(ctx, c)).To(Succeed())
	waitFor(t, func(g Gomega) {
		for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &networkingv1.Ingress{}} {
			err := sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "code-server"}, o)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T still exists: %v", o, err)
		}
	}).Should(Succeed(), "logs in %s", logsHint())
}

// requestReconcile asks a Flux object to reconcile now (Flux's
// reconcile.fluxcd.io/requestedAt), instead of waiting for its interval or
// retry: an RBAC grant is not something Flux watches.
func requestReconcile(t *testing.T, o client.Object) {
	t.Helper()
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(context.Background(), client.ObjectKeyFromObject(o), o)).To(Succeed())
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["reconcile.fluxcd.io/requestedAt"] = fmt.Sprint(metav1.Now().UnixNano())
		o.SetAnnotations(a)
		g.Expect(sb.Client.Update(context.Background(), o)).To(Succeed())
	}).Should(Succeed())
}

// deployerRules let a delivered code-server or vllm-server Claim be applied:
// everything they render but Ingresses, which tests grant when they need to.
var deployerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
	{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"*"}},
}

// deployer creates the ServiceAccount "deployer" in ns, which Flux applies
// delivered Claims as, bound to a Role with deployerRules.
func deployer(t testing.TB, ns string) *rbacv1.Role {
	t.Helper()
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}, Rules: append([]rbacv1.PolicyRule(nil), deployerRules...)}
	create(t, role)
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}}})
	return role
}
