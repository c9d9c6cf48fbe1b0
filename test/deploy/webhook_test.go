package deploy

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/sandbox"
	"github.com/packline/packline/test/wrappers"
)

const (
	certSecret     = "packline-webhook-server-cert"
	webhookService = "packline-webhook-service"
)

// checkSelfProvisionedCerts: the deployed manager filled the shipped, empty
// Secret with a CA and a serving certificate for its Service, and wrote
// that CA into every webhook of both configurations. config/default holds
// no certificate and the test provides none.
func checkSelfProvisionedCerts(t *testing.T, s *sandbox.Sandbox) {
	t.Helper()
	ctx := context.Background()
	var sec corev1.Secret
	eventually(t, 30*time.Second, "the manager fills its certificate Secret", func() error {
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: certSecret}, &sec); err != nil {
			return err
		}
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			if len(sec.Data[k]) == 0 {
				return fmt.Errorf("no %s yet", k)
			}
		}
		return nil
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		t.Fatal("ca.crt holds no certificate")
	}
	block, _ := pem.Decode(sec.Data["tls.crt"])
	if block == nil {
		t.Fatal("tls.crt is not PEM")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	dnsName := webhookService + "." + ns + ".svc"
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate does not verify for %s: %v", dnsName, err)
	}
	eventually(t, 30*time.Second, "the CA bundle is in both webhook configurations", func() error {
		var m admissionregistrationv1.MutatingWebhookConfiguration
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		if err := s.Client.Get(ctx, client.ObjectKey{Name: "packline-mutating-webhook-configuration"}, &m); err != nil {
			return err
		}
		if err := s.Client.Get(ctx, client.ObjectKey{Name: "packline-validating-webhook-configuration"}, &v); err != nil {
			return err
		}
		var bundles [][]byte
		for _, h := range m.Webhooks {
			bundles = append(bundles, h.ClientConfig.CABundle)
		}
		for _, h := range v.Webhooks {
			bundles = append(bundles, h.ClientConfig.CABundle)
		}
		for i, b := range bundles {
			if !bytes.Equal(b, sec.Data["ca.crt"]) {
				return fmt.Errorf("webhook %d: caBundle is not the Secret's ca.crt", i)
			}
		}
		if len(bundles) != 4 {
			return fmt.Errorf("%d webhooks", len(bundles))
		}
		return nil
	})
}

// waitWebhookEndpoints waits until the webhook Service resolves to exactly
// the ready manager pods: the node publishes their addresses, and a pod
// counts only once its /readyz (which waits for the certificate) passes.
func waitWebhookEndpoints(t *testing.T, s *sandbox.Sandbox) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 60*time.Second, "the webhook Service resolves to both ready manager pods", func() error {
		var pods corev1.PodList
		if err := s.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
			return err
		}
		want := map[string]bool{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				want[p.Status.PodIP] = true
			}
		}
		var slices discoveryv1.EndpointSliceList
		if err := s.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: webhookService}); err != nil {
			return err
		}
		got := map[string]bool{}
		for _, sl := range slices.Items {
			for _, e := range sl.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					got[e.Addresses[0]] = true
				}
			}
		}
		if len(want) != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("ready endpoints %v, running manager pods %v", got, want)
		}
		return nil
	})
}

// checkClaimEntitlement: through the deployed manager's webhooks, a Claim
// by a user who may create Claims and everything the template renders, but
// holds no claim verb on the template, is denied, and the denial names the
// missing right; the same Claim by a user who also holds the claim verb is
// admitted, records that user as its requester, and reaches Ready.
func checkClaimEntitlement(t *testing.T, s *sandbox.Sandbox) {
	t.Helper()
	ctx := context.Background()
	waitWebhookEndpoints(t, s)

	repo := gitserver.Serve(t, gitserver.Repo{Name: "workloads", Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: sandbox.TenantLabels}}
	tpl := wrappers.MakeClaimTemplate("code-server").Source(repo.URL, "main", "apps/code-server/base").Service("code-server").
		Schema(`{"type":"object","additionalProperties":false,"properties":{"replicas":{"type":"integer","minimum":1,"maximum":3}}}`).
		Exposures(v1alpha1.ExposureClusterIP).ForNamespaces(sandbox.TenantLabels).RepositoryPrefix(s.Registry.Host + "/claims").Obj()
	// What a tenant needs besides the claim verb: create on Claims and on
	// every kind the template declares.
	author := []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"claims"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create"}},
	}
	claimer := append([]rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"claimtemplates"},
		Verbs: []string{v1alpha1.ClaimVerb}, ResourceNames: []string{tpl.Name}}}, author...)
	objs := []client.Object{tenant, tpl,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "claim-author"}, Rules: author},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "code-server-claimer"}, Rules: claimer},
		binding("alice", "claim-author"), binding("bob", "code-server-claimer"),
	}
	for _, o := range objs {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	checkDenied(t, s, "my-code-server")

	c := tenantClaim("my-code-server")
	if err := as(t, s, "bob").Create(ctx, c); err != nil {
		t.Fatalf("bob, who holds the claim verb, is refused: %v", err)
	}
	if who := c.Annotations[v1alpha1.AnnotationRequester]; !strings.Contains(who, `"username":"bob"`) {
		t.Errorf("requester annotation %q does not name bob", who)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Claim"))
	ref := waitReady(t, s, u)
	t.Logf("bob's Claim is Ready through the deployed manager: %s", ref)
}

func tenantClaim(name string) *v1alpha1.Claim {
	return wrappers.MakeClaim(name, "tenant", "code-server").Values(`{"replicas":2}`).Exposure(v1alpha1.ExposureClusterIP).
		Target(v1alpha1.Target{PlainHTTP: true}).Obj()
}

// checkDenied: alice's Claim is refused by the webhook (not by RBAC on
// Claims, and not for an unreachable webhook), naming her and the claim
// verb on the template she lacks.
func checkDenied(t *testing.T, s *sandbox.Sandbox, name string) {
	t.Helper()
	err := as(t, s, "alice").Create(context.Background(), tenantClaim(name))
	wantRight := fmt.Sprintf(`%q on claimtemplates.%s named "code-server"`, v1alpha1.ClaimVerb, v1alpha1.GroupVersion.Group)
	if err == nil {
		t.Fatal("a Claim by alice, who holds no claim verb on the template, was admitted")
	}
	if !strings.Contains(err.Error(), wantRight) || !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("alice's Claim was refused with %q; want a denial by the webhook naming alice and the missing right %s", err, wantRight)
	}
	t.Logf("alice denied: %v", err)
}

func binding(user, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role, Namespace: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
}

// as is a client that impersonates user (the sandbox admin may).
func as(t *testing.T, s *sandbox.Sandbox, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
