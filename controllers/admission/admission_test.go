package admission_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/admission"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/testenv"
)

var env *testenv.Env

// lastGuard is the webhook configuration check of the last manager started.
var lastGuard *admission.ConfigGuard

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	testenv.MainWithWebhooks(m, &env)
}

// startManager runs the controllers and the webhook server where envtest's
// webhook configurations point, until the test ends or stop is called.
func startManager(t testing.TB, webhooks bool) (stop func()) {
	t.Helper()
	return start(t, webhooks, true)
}

// startWebhooks runs only the webhook server, for the latency benchmark:
// the controllers' work on hundreds of Claims would add noise, not signal.
func startWebhooks(t testing.TB) (stop func()) {
	t.Helper()
	return start(t, true, false)
}

func start(t testing.TB, webhooks, reconcilers bool) (stop func()) {
	t.Helper()
	wh := env.Webhook()
	// The client limits ctrl.GetConfigOrDie gives the real manager.
	restCfg := rest.CopyConfig(env.Config)
	restCfg.QPS, restCfg.Burst = 20, 30
	cacheOpts, err := controllers.CacheOptions(pipeline.DefaultConfig(), restCfg)
	if err != nil {
		t.Fatal(err)
	}
	// The webhook server takes only the API server's client certificate,
	// as the manager with --webhook-client-ca.
	serverTLS, err := admission.ServerTLS(&admission.ClientAuth{CAFile: env.WebhookClient.CA})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
			TLSOpts: []func(*tls.Config){serverTLS},
		}),
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	cfg.BackoffBase, cfg.BackoffCap = 100*time.Millisecond, time.Second
	var opts []controllers.Option
	if webhooks {
		if err := admission.Setup(mgr, wh.LocalServingCertDir); err != nil {
			t.Fatal(err)
		}
		// envtest's names for config/webhook's configurations.
		guard := &admission.ConfigGuard{Reader: mgr.GetAPIReader(), CertDir: wh.LocalServingCertDir,
			MutatingName: "mutating-webhook-configuration", ValidatingName: "validating-webhook-configuration",
			Interval: 200 * time.Millisecond, FailingInterval: 200 * time.Millisecond}
		if err := mgr.Add(guard); err != nil {
			t.Fatal(err)
		}
		lastGuard = guard
		opts = append(opts, controllers.WithRequesterSealer(entitlement.NewCertDirSealer(wh.LocalServingCertDir).WithTrust(guard.Err)))
	}
	if reconcilers {
		if err := controllers.Setup(mgr, cfg, opts...); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	if webhooks {
		NewWithT(t).Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	}
	return stop
}

// user is a client that impersonates name (and groups), collecting the
// warnings the API server returns.
type user struct {
	client.Client
	name     string
	warnings *warnings
}

type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

func as(t testing.TB, name string, groups ...string) user {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: append([]string{"system:authenticated"}, groups...)}
	w := &warnings{}
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return user{Client: c, name: name, warnings: w}
}

var nsCounter atomic.Int32

// tenantLabels mark the namespaces the test templates are for.
var tenantLabels = map[string]string{"tenant": "true"}

// tenantNamespace makes a namespace labelled as a tenant.
func tenantNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("adm%d-%d", time.Now().Unix()%100000, nsCounter.Add(1)),
		Labels: tenantLabels,
	}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// grant binds a Role with rules to subject in ns.
func grant(t testing.TB, ns, subject string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	name := fmt.Sprintf("grant-%s-%d", strings.ReplaceAll(subject, ":", "-"), nsCounter.Add(1))
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: subject}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// Rules an admin writes for tenants.
func writeClaims() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"packline.dev"}, Resources: []string{"claims", "artifacts"}, Verbs: []string{"create", "update", "patch", "get"}}
}

func claimVerb(tpl string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"packline.dev"}, Resources: []string{"claimtemplates"}, Verbs: []string{"claim"}, ResourceNames: []string{tpl}}
}

func createKinds() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services", "persistentvolumeclaims"}, Verbs: []string{"create"}},
	}
}

func getSecret(name string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{name}}
}

// entitled grants everything a Claim of tpl needs.
func entitled(t testing.TB, ns, subject, tpl string, extra ...rbacv1.PolicyRule) {
	grant(t, ns, subject, append(append([]rbacv1.PolicyRule{writeClaims(), claimVerb(tpl)}, createKinds()...), extra...)...)
}

func createTemplate(t testing.TB, tpl *v1alpha1.ClaimTemplate) {
	t.Helper()
	if err := env.Client.Create(context.Background(), tpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), tpl) })
}

// requester reads the recorded requester of a stored Claim.
func requester(g Gomega, c *v1alpha1.Claim) string {
	got := &v1alpha1.Claim{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), got)).To(Succeed())
	return got.Annotations[v1alpha1.AnnotationRequester]
}
