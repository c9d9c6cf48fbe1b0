package admission_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/wrappers"
)

// Every allow and deny path of Claim admission, each by a user with its
// own RBAC, through the real API server and the webhook server.
func TestClaimAdmission(t *testing.T) {
	startManager(t, true)
	ns := tenantNamespace(t)
	other := tenantNamespace(t)
	tpl := wrappers.MakeClaimTemplate("code-" + ns).ForNamespaces(tenantLabels).Parameters(v1alpha1.ParameterBinding{
		Value: "image", Kind: v1alpha1.BindingImage, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "code-server"}}).Obj()
	createTemplate(t, tpl)
	admins := wrappers.MakeClaimTemplate("admins-" + ns).ForNamespaces(tenantLabels).Groups("platform-admins").Obj()
	createTemplate(t, admins)

	private := wrappers.MakeClaimTemplate("private-"+ns).ForNamespaces(tenantLabels).Private("repo-creds", "").Obj()
	createTemplate(t, private)
	entitled(t, ns, "alice", tpl.Name, getSecret("push-ok"), claimVerb(private.Name))
	grant(t, ns, "bob", writeClaims())
	grant(t, ns, "carol", writeClaims(), claimVerb(tpl.Name))
	entitled(t, ns, "frank", admins.Name)
	entitled(t, other, "alice", tpl.Name)

	cases := []struct {
		name   string
		by     string
		groups []string
		claim  *v1alpha1.Claim
		// deny is empty when the Claim must be admitted; else every string
		// must appear in the denial.
		deny []string
	}{
		{name: "entitled user", by: "alice", claim: wrappers.MakeClaim("ok", ns, tpl.Name).Values(`{"replicas":2}`).Obj()},
		{name: "no claim verb", by: "bob", claim: wrappers.MakeClaim("no-verb", ns, tpl.Name).Obj(),
			deny: []string{`user "bob"`, `spec.templateRef`, `"claim" on claimtemplates.packline.dev named "` + tpl.Name + `"`, `"create" on deployments.apps`}},
		{name: "cannot create a rendered kind", by: "carol", claim: wrappers.MakeClaim("no-create", ns, tpl.Name).Obj(),
			deny: []string{`ClaimTemplate ` + tpl.Name + ` renders Deployment.apps needs "create" on deployments.apps in namespace ` + ns, `"create" on services`}},
		{name: "invalid values", by: "alice", claim: wrappers.MakeClaim("values", ns, tpl.Name).Values(`{"replicas":9}`).Obj(),
			deny: []string{"spec.values.replicas"}},
		{name: "image value with a bidirectional character", by: "alice", claim: wrappers.MakeClaim("image", ns, tpl.Name).Values(`{"image":"ghcr.io/acme/app:v1\u202e"}`).Obj(),
			deny: []string{"spec.values.image", "U+202E"}},
		{name: "valid image value", by: "alice", claim: wrappers.MakeClaim("image-ok", ns, tpl.Name).Values(`{"image":"ghcr.io/acme/app:v1"}`).Obj()},
		{name: "exposure not offered", by: "alice", claim: wrappers.MakeClaim("expose", ns, tpl.Name).Exposure(v1alpha1.ExposureLoadBalancer).Obj(),
			deny: []string{"spec.exposure.type", "LoadBalancer is not offered"}},
		{name: "secret the user may not read", by: "alice", claim: wrappers.MakeClaim("secret", ns, tpl.Name).PushSecret("team-registry").Obj(),
			deny: []string{`spec.target.pushSecretRef: using Secret team-registry needs "get" on secrets named "team-registry"`}},
		{name: "secret the user may read", by: "alice", claim: wrappers.MakeClaim("secret-ok", ns, tpl.Name).PushSecret("push-ok").Obj()},
		{name: "not in the template's groups", by: "alice", claim: wrappers.MakeClaim("groups", ns, admins.Name).Obj(),
			deny: []string{"spec.access.groups (platform-admins)"}},
		{name: "in the template's groups", by: "frank", groups: []string{"platform-admins"}, claim: wrappers.MakeClaim("groups-ok", ns, admins.Name).Obj()},
		{name: "private template, own repository", by: "alice", claim: func() *v1alpha1.Claim {
			c := wrappers.MakeClaim("private", ns, private.Name).Obj()
			c.Spec.Target = &v1alpha1.Target{Repository: "registry.example.com/elsewhere"}
			return c
		}(), deny: []string{"spec.target.repository: not allowed, because ClaimTemplate " + private.Name + " reads a private repository"}},
		{name: "private template, tag only", by: "alice", claim: func() *v1alpha1.Claim {
			c := wrappers.MakeClaim("private-tag", ns, private.Name).Obj()
			c.Spec.Target = &v1alpha1.Target{Tag: "v2"}
			return c
		}()},
		{name: "forged requester is overwritten", by: "alice",
			claim: wrappers.MakeClaim("forged", ns, tpl.Name).Annotation(v1alpha1.AnnotationRequester, `{"username":"system:admin"}`).
				Annotation(v1alpha1.AnnotationRequesterSeal, "Zm9yZ2Vk").Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			u := as(t, tc.by, tc.groups...)
			err := u.Create(context.Background(), tc.claim)
			if len(tc.deny) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(requester(g, tc.claim)).To(ContainSubstring(`"username":"` + tc.by + `"`))
				return
			}
			g.Expect(err).To(HaveOccurred())
			t.Logf("denied: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(`admission webhook "vclaim.packline.dev" denied the request`))
			for _, want := range tc.deny {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

// A namespace the template's selector does not match is refused, naming
// the selector.
func TestClaimNamespaceSelector(t *testing.T) {
	startManager(t, true)
	g := NewWithT(t)
	ns := tenantNamespace(t)
	nsObj := &corev1.Namespace{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	nsObj.Labels = map[string]string{"tenant": "false"}
	g.Expect(env.Client.Update(context.Background(), nsObj)).To(Succeed())
	tpl := wrappers.MakeClaimTemplate("sel-" + ns).ForNamespaces(tenantLabels).Obj()
	createTemplate(t, tpl)
	entitled(t, ns, "alice", tpl.Name)
	err := as(t, "alice").Create(context.Background(), wrappers.MakeClaim("c", ns, tpl.Name).Obj())
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.access.namespaceSelector"))
}

// A missing template is admitted with a warning, so GitOps may apply the
// Claim first; when the template appears, the controller checks the
// recorded requester's rights before rendering and stalls the Claim.
func TestClaimBeforeTemplate(t *testing.T) {
	startManager(t, true)
	g := NewWithT(t)
	ns := tenantNamespace(t)
	name := "later-" + ns
	bob := as(t, "bob")
	grant(t, ns, "bob", writeClaims())
	c := wrappers.MakeClaim("early", ns, name).Obj()
	g.Expect(bob.Create(context.Background(), c)).To(Succeed())
	g.Expect(bob.warnings.all()).To(ContainSubstring(`ClaimTemplate "` + name + `" does not exist yet`))

	createTemplate(t, wrappers.MakeClaimTemplate(name).ForNamespaces(tenantLabels).Obj())
	g.Eventually(func(g Gomega) {
		got := &v1alpha1.Claim{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got)).To(Succeed())
		stalled := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(controllers.ReasonEntitlementDenied))
		g.Expect(stalled.Message).To(ContainSubstring(`"claim" on claimtemplates.packline.dev named "` + name + `"`))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(jobsIn(g, ns)).To(BeZero(), "no Job may run for a Claim whose requester is not entitled")

	// Once an admin grants the rights, the Claim renders without an edit.
	grant(t, ns, "bob", append([]rbacv1.PolicyRule{claimVerb(name)}, createKinds()...)...)
	// The entitlement cache keeps a verdict 10 s: allow for that under load.
	g.Eventually(func() int { return jobsIn(g, ns) }, 60*time.Second, 100*time.Millisecond).Should(Equal(1))
}

// Updates are checked against the updating user; an update that leaves
// the spec alone keeps the recorded requester.
func TestClaimUpdateBySecondUser(t *testing.T) {
	startManager(t, true)
	g := NewWithT(t)
	ns := tenantNamespace(t)
	tpl := wrappers.MakeClaimTemplate("upd-" + ns).ForNamespaces(tenantLabels).Obj()
	createTemplate(t, tpl)
	entitled(t, ns, "alice", tpl.Name)
	entitled(t, ns, "dave", tpl.Name)
	grant(t, ns, "eve", writeClaims())

	c := wrappers.MakeClaim("shared", ns, tpl.Name).Values(`{"replicas":1}`).Obj()
	g.Expect(as(t, "alice").Create(context.Background(), c)).To(Succeed())
	g.Expect(requester(g, c)).To(ContainSubstring(`"alice"`))

	// The controller patches the Claim's status meanwhile: retry on a
	// conflict, so the result is the webhook's answer.
	edit := func(u user, mutate func(*v1alpha1.Claim)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &v1alpha1.Claim{}
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
				return err
			}
			mutate(got)
			return u.Update(context.Background(), got)
		})
	}
	g.Expect(edit(as(t, "dave"), func(c *v1alpha1.Claim) { c.Spec.Values.Raw = []byte(`{"replicas":2}`) })).To(Succeed())
	g.Expect(requester(g, c)).To(ContainSubstring(`"dave"`))

	err := edit(as(t, "eve"), func(c *v1alpha1.Claim) { c.Spec.Values.Raw = []byte(`{"replicas":3}`) })
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`user "eve"`))

	// eve may still label it, and may not rewrite who asked.
	g.Expect(edit(as(t, "eve"), func(c *v1alpha1.Claim) {
		c.Labels = map[string]string{"team": "a"}
		c.Annotations[v1alpha1.AnnotationRequester] = `{"username":"eve"}`
	})).To(Succeed())
	g.Expect(requester(g, c)).To(ContainSubstring(`"dave"`))
}

// With the webhook server down, failurePolicy Fail refuses the Claim and
// the error names packline's webhook.
func TestClaimWebhookUnreachable(t *testing.T) {
	stop := startManager(t, true)
	stop()
	g := NewWithT(t)
	ns := tenantNamespace(t)
	err := env.Client.Create(context.Background(), wrappers.MakeClaim("down", ns, "any").Obj())
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`failed calling webhook "mclaim.packline.dev"`))
}

// jobsIn counts the Jobs in ns.
func jobsIn(g Gomega, ns string) int {
	var jobs batchv1.JobList
	g.Expect(env.Client.List(context.Background(), &jobs, client.InNamespace(ns))).To(Succeed())
	return len(jobs.Items)
}
