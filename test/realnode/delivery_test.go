package realnode

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
)

// A Claim is rendered by a worker container on the real node (cloning the
// template from the Git server on the bridge's gateway), pushed to the
// sandbox registry, and delivered by Flux, applied as the tenant's
// deployer: it reaches Ready with Delivered=True.
func TestClaimDeliveredByFluxOnRealNode(t *testing.T) {
	requireNode(t)
	ctx := context.Background()
	repo, err := sandbox.ServeGitRepo(sb.ServeIP(), t.TempDir(), "workloads", gitserver.FixtureDir(t, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	ns := newNamespace(t, sb, nil)
	tpl := &v1alpha1.ClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "delivered-" + ns},
		Spec: v1alpha1.ClaimTemplateSpec{
			Source:       v1alpha1.TemplateSource{URL: repo.URL, Ref: "main", Path: "apps/code-server/base"},
			Kinds:        []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
			Service:      "code-server",
			ValuesSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"replicas":{"type":"integer","minimum":1,"maximum":3}}}`)},
			Parameters: []v1alpha1.ParameterBinding{{Value: "replicas", Kind: "Replicas",
				Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "code-server"}}},
			Access:           v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sandbox.TenantLabels}},
			RepositoryPrefix: sb.Registry.Host + "/claims",
		},
	}
	mustCreate(t, tpl)
	t.Cleanup(func() { _ = sb.Client.Delete(context.Background(), tpl) })

	mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}})
	mustCreate(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"*"}},
	}})
	mustCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}}})

	c := &v1alpha1.Claim{
		ObjectMeta: metav1.ObjectMeta{Name: "ide", Namespace: ns},
		Spec: v1alpha1.ClaimSpec{
			TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name},
			Values:      &apiextensionsv1.JSON{Raw: []byte(`{"replicas":2}`)},
			Target:      &v1alpha1.Target{PlainHTTP: true},
			// The code-server image is not in the sandbox registry: Flux
			// applies without waiting for the Deployment to be healthy.
			Delivery: &v1alpha1.Delivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer", Wait: ptr.To(false)}},
		},
	}
	mustCreate(t, c)
	waitFor(t, func(g Gomega) {
		g.Expect(sb.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		st := &c.Status.PipelineStatus
		g.Expect(isTrue(st, "Stalled")).To(BeFalse(), "stalled: %+v", condition(st, "Stalled"))
		g.Expect(st.ObservedGeneration).To(Equal(c.Generation))
		g.Expect(isTrue(st, v1alpha1.ConditionDelivered)).To(BeTrue(), "delivered: %+v", condition(st, v1alpha1.ConditionDelivered))
		g.Expect(isTrue(st, "Ready")).To(BeTrue(), "phase %s, conditions %+v", st.Phase, st.Conditions)
	}).Should(Succeed(), "logs in %s", sb.Logs())

	g := NewWithT(t)
	g.Expect(c.Status.Digest).To(HavePrefix("sha256:"))
	g.Expect(c.Status.Delivery.LastAppliedRevision).To(HaveSuffix(c.Status.Digest))
	dep := &appsv1.Deployment{}
	g.Expect(sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "code-server"}, dep)).To(Succeed())
	g.Expect(dep.Labels).To(HaveKeyWithValue("kustomize.toolkit.fluxcd.io/name", c.Name))
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(2)), "the Claim's values reached the applied Deployment")

	// The render ran as a container on the real node.
	pods := ownedPods(g, ns, c.Name)
	g.Expect(pods).NotTo(BeEmpty())
	g.Expect(pods[0].Spec.NodeName).To(Equal(sb.NodeName()))
	g.Expect(pods[0].Status.ContainerStatuses).NotTo(BeEmpty())
	g.Expect(pods[0].Status.ContainerStatuses[0].ContainerID).To(HavePrefix("containerd://"))
}

func mustCreate(t testing.TB, obj client.Object) {
	t.Helper()
	if err := sb.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}
