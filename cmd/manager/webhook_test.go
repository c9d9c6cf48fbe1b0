package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/admission"
	"github.com/packline/packline/test/manifests"
	"github.com/packline/packline/test/testenv"

	"github.com/packline/packline/test/loopback"
)

const installNS = "packline-system"

func TestWebhookFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	o := defaultWebhookOptions()
	o.ClientCA = "/etc/ca.crt"
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), "POD_NAMESPACE") {
		t.Errorf("self provisioning without a namespace: %v, want an error naming POD_NAMESPACE", err)
	}
	t.Setenv("POD_NAMESPACE", "ops")
	o = defaultWebhookOptions()
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), "--webhook-client-ca is not set") {
		t.Errorf("no client CA and no explicit insecure flag: %v, want an error naming --webhook-client-ca", err)
	}
	o = defaultWebhookOptions()
	o.ClientCA = "/etc/ca.crt"
	if err := o.complete(); err != nil || o.Namespace != "ops" {
		t.Errorf("namespace from POD_NAMESPACE: %q, %v", o.Namespace, err)
	}
	o = defaultWebhookOptions()
	o.Provisioning, o.ClientCA = "manual", "/etc/ca.crt"
	if err := o.complete(); err == nil || !strings.Contains(err.Error(), `"self" or "external"`) {
		t.Errorf("unknown provisioning: %v", err)
	}
	o = defaultWebhookOptions()
	o.InsecureSkipClientVerify = true
	if err := o.complete(); err != nil {
		t.Errorf("explicit --webhook-insecure-skip-client-verify: %v", err)
	}
	o = defaultWebhookOptions()
	o.Provisioning, o.Port, o.ClientCA = certsExternal, 0, "/etc/ca.crt"
	if err := o.complete(); err == nil {
		t.Error("port 0 accepted")
	}
	o = defaultWebhookOptions()
	o.Enabled, o.Provisioning = false, "anything"
	if err := o.complete(); err != nil {
		t.Errorf("--enable-webhooks=false still checks the other flags: %v", err)
	}
	fs := flagSet(t, "--enable-webhooks=false", "--webhook-host=127.0.3.4", "--webhook-port=9999", "--webhook-cert-provisioning=external")
	if fs.Enabled || fs.Host != "127.0.3.4" || fs.Port != 9999 || fs.Provisioning != certsExternal {
		t.Errorf("flags not bound: %+v", fs)
	}
	if d := defaultWebhookOptions(); !d.Enabled || d.Port != 9443 || d.Provisioning != certsSelf || d.Host != "" ||
		d.CertDir != filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs") {
		t.Errorf("defaults: %+v", d)
	}
}

// TestFlagDefaultsMatchConfig: the names the manager uses by default are the
// objects config/default ships, so a plain install needs no name flags.
func TestFlagDefaultsMatchConfig(t *testing.T) {
	objs, err := manifests.Render(filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		have[u.GetKind()+"/"+u.GetName()] = u
	}
	d := defaultWebhookOptions()
	for _, key := range []string{"Secret/" + d.SecretName, "Service/" + d.ServiceName,
		"MutatingWebhookConfiguration/" + d.MutatingName, "ValidatingWebhookConfiguration/" + d.ValidatingName} {
		if have[key] == nil {
			t.Errorf("config/default has no %s", key)
		}
	}
	var dep appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(have["Deployment/packline-manager"].Object, &dep); err != nil {
		t.Fatal(err)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	o := defaultWebhookOptions()
	fs := flagSetOn(t, &o, c.Args...)
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == fs.SecretName && m.MountPath == fs.CertDir {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("Secret %s is not mounted at --webhook-cert-dir %s", fs.SecretName, fs.CertDir)
	}
	port := false
	for _, p := range c.Ports {
		port = port || (p.Name == "webhook-server" && int(p.ContainerPort) == fs.Port)
	}
	if !port {
		t.Errorf("no container port webhook-server = --webhook-port %d", fs.Port)
	}
}

func flagSet(t *testing.T, args ...string) webhookOptions {
	o := defaultWebhookOptions()
	return flagSetOn(t, &o, args...)
}

func flagSetOn(t *testing.T, o *webhookOptions, args ...string) webhookOptions {
	t.Helper()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.bindFlags(fs)
	var known []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if fs.Lookup(name) != nil {
			known = append(known, a)
		}
	}
	if err := fs.Parse(known); err != nil {
		t.Fatal(err)
	}
	return *o
}

// TestNameSelector: list and watch requests on the three collections carry
// a metadata.name field selector; gets, writes and other collections are
// left as they are.
func TestNameSelector(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.URL.Query().Get("fieldSelector")
		mu.Unlock()
	}))
	defer srv.Close()
	o := defaultWebhookOptions()
	o.Namespace = "ops"
	cfg := nameScopedConfig(&rest.Config{Host: srv.URL + "/prefix"}, o)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []struct{ method, path string }{
		{"GET", "/prefix/api/v1/namespaces/ops/secrets?watch=true"},
		{"GET", "/prefix/api/v1/namespaces/ops/secrets?fieldSelector=type%3DOpaque"},
		{"GET", "/prefix/api/v1/namespaces/ops/secrets/other"},
		{"PUT", "/prefix/api/v1/namespaces/ops/secrets/packline-webhook-server-cert"},
		{"GET", "/prefix/api/v1/namespaces/elsewhere/secrets"},
		{"GET", "/prefix/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"},
		{"GET", "/prefix/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"},
	} {
		r, _ := http.NewRequest(req.method, srv.URL+req.path, nil)
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := map[string]string{
		"GET /prefix/api/v1/namespaces/ops/secrets":                                        "type=Opaque,metadata.name=packline-webhook-server-cert",
		"GET /prefix/api/v1/namespaces/ops/secrets/other":                                  "",
		"PUT /prefix/api/v1/namespaces/ops/secrets/packline-webhook-server-cert":           "",
		"GET /prefix/api/v1/namespaces/elsewhere/secrets":                                  "",
		"GET /prefix/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations":   "metadata.name=packline-mutating-webhook-configuration",
		"GET /prefix/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": "metadata.name=packline-validating-webhook-configuration",
	}
	for k, v := range want {
		if got, ok := seen[k]; !ok || got != v {
			t.Errorf("%s: fieldSelector %q (seen %v), want %q", k, got, ok, v)
		}
	}
}

// TestExternalCertsServeOnceFilesAppear: with external provisioning the
// handlers are registered, and the manager is ready, only once the cert
// dir holds a key pair.
func TestExternalCertsServeOnceFilesAppear(t *testing.T) {
	env := startEnv(t)
	o := defaultWebhookOptions()
	o.Provisioning, o.Host, o.Port, o.CertDir = certsExternal, "127.0.0.1", freePort(t), t.TempDir()
	o.InsecureSkipClientVerify = true
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	mgr := newManager(t, env.Config, o)
	var registered atomic.Int32
	readyz, err := setupWebhooks(mgr, o, func(m ctrl.Manager, dir string) error {
		registered.Add(1)
		m.GetWebhookServer().Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pong") }))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	req := httptest.NewRequest("GET", "/readyz", nil)
	// Not ready, and nothing registered, for as long as the folder is empty
	// (several of the waiter's one-second polls).
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(readyz(req)).NotTo(Succeed(), "ready without certificate files")
		g.Expect(registered.Load()).To(BeZero(), "handlers registered without certificate files")
	}).WithTimeout(2500 * time.Millisecond).WithPolling(100 * time.Millisecond).Should(Succeed())
	certPEM, keyPEM := selfSigned(t, "packline-webhook-service.packline-system.svc")
	writeFiles(t, o.CertDir, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	eventually(t, 30*time.Second, "ready once the files appear", func() error { return readyz(req) })
	if n := registered.Load(); n != 1 {
		t.Errorf("registered %d times", n)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "packline-webhook-service.packline-system.svc"}}}).
		Get(fmt.Sprintf("https://127.0.0.1:%d/ping", o.Port))
	if err != nil {
		t.Fatalf("the webhook server does not serve the external certificate: %v", err)
	}
	resp.Body.Close()
}

// TestSelfProvisionedCertsWithResourceNamesRole runs certificate
// provisioning against a real API server as the manager's ServiceAccount,
// bound to exactly config/default's RBAC: the Role that names only the
// certificate Secret, and the ClusterRole that names only the two webhook
// configurations. The manager fills the shipped Secret with a CA and a
// serving certificate for the Service, writes the CA into every webhook of
// both configurations, serves with that certificate once it is mounted,
// and reports ready. The same identity cannot list Secrets without the
// name selector, nor read any other Secret.
func TestSelfProvisionedCertsWithResourceNamesRole(t *testing.T) {
	env := startEnv(t)
	ctx := context.Background()
	admin := env.Client
	installRBACAndWebhooks(t, admin)
	other := &corev1.Secret{}
	other.Namespace, other.Name = installNS, "someone-elses-credentials"
	other.StringData = map[string]string{"token": "hunter2"}
	if err := admin.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	saCfg := serviceAccountConfig(t, env.Config, installNS, "packline-manager")

	// The manager's identity cannot see Secrets beyond its own.
	sa, err := client.New(saCfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.SecretList
	if err := sa.List(ctx, &list, client.InNamespace(installNS)); !apierrors.IsForbidden(err) {
		t.Errorf("listing every Secret as the manager: %v, want Forbidden", err)
	}
	if err := sa.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading another Secret as the manager: %v, want Forbidden", err)
	}
	if err := sa.List(ctx, &list, client.InNamespace(installNS),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", "packline-webhook-server-cert")}); err != nil {
		t.Errorf("listing its own Secret by name: %v", err)
	}

	o := defaultWebhookOptions()
	o.Host, o.Port, o.CertDir, o.Namespace, o.rotatorName = "127.0.0.1", freePort(t), t.TempDir(), installNS, "cert-rotator-rbac-test"
	o.InsecureSkipClientVerify = true
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	mgr := newManager(t, saCfg, o)
	readyz, err := setupWebhooks(mgr, o, admission.Setup)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	// The kubelet's part: the Secret volume follows the Secret.
	go mountSecret(runCtx, env.Config, installNS, o.SecretName, o.CertDir)
	startManager(t, mgr)

	req := httptest.NewRequest("GET", "/readyz", nil)
	eventually(t, 90*time.Second, "the manager is ready", func() error { return readyz(req) })

	var secret corev1.Secret
	if err := admin.Get(ctx, client.ObjectKey{Namespace: installNS, Name: o.SecretName}, &secret); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("the certificate Secret has no %s", k)
		}
	}
	dnsName := "packline-webhook-service.packline-system.svc"
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatal("ca.crt holds no certificate")
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatal("tls.crt is not PEM")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify for %s: %v", dnsName, err)
	}

	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	eventually(t, 30*time.Second, "the CA bundle is in both webhook configurations", func() error {
		if err := admin.Get(ctx, client.ObjectKey{Name: o.MutatingName}, &m); err != nil {
			return err
		}
		if err := admin.Get(ctx, client.ObjectKey{Name: o.ValidatingName}, &v); err != nil {
			return err
		}
		var bundles [][]byte
		for _, h := range m.Webhooks {
			bundles = append(bundles, h.ClientConfig.CABundle)
		}
		for _, h := range v.Webhooks {
			bundles = append(bundles, h.ClientConfig.CABundle)
		}
		if len(bundles) != 4 {
			return fmt.Errorf("%d webhooks", len(bundles))
		}
		for i, b := range bundles {
			if !bytes.Equal(b, secret.Data["ca.crt"]) {
				return fmt.Errorf("webhook %d has caBundle of %d bytes, not the Secret's ca.crt", i, len(b))
			}
		}
		return nil
	})

	conn, err := tls.Dial("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)), &tls.Config{RootCAs: pool, ServerName: dnsName})
	if err != nil {
		t.Fatalf("TLS to the webhook server with the injected CA: %v", err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if !served.Equal(leaf) {
		t.Error("the webhook server serves a certificate other than the Secret's")
	}
}

// installRBACAndWebhooks applies config/default's namespace, ServiceAccount,
// certificate Secret, RBAC and webhook configurations (not the Deployment:
// the test runs the manager in-process).
func installRBACAndWebhooks(t *testing.T, c client.Client) {
	t.Helper()
	objs, err := manifests.Render(filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{"Namespace": true, "ServiceAccount": true, "Secret": true, "Role": true, "RoleBinding": true,
		"ClusterRole": true, "ClusterRoleBinding": true, "Service": true,
		"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true}
	for _, first := range []bool{true, false} {
		for _, u := range objs {
			if !kinds[u.GetKind()] || (u.GetKind() == "Namespace") != first {
				continue
			}
			if err := c.Patch(context.Background(), u.DeepCopy(), client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
				t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// serviceAccountConfig authenticates with a token of the ServiceAccount,
// as the manager's pod does.
func serviceAccountConfig(t *testing.T, admin *rest.Config, ns, name string) *rest.Config {
	t.Helper()
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// mountSecret plays the kubelet's Secret volume: whenever the Secret's data
// changes, its keys are written into dir.
func mountSecret(ctx context.Context, admin *rest.Config, ns, name, dir string) {
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return
	}
	var last string
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && fmt.Sprint(s.Data) != last {
			last = fmt.Sprint(s.Data)
			for k, b := range s.Data {
				tmp := filepath.Join(dir, "."+k+".tmp")
				if os.WriteFile(tmp, b, 0o600) == nil {
					_ = os.Rename(tmp, filepath.Join(dir, k))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func startEnv(t *testing.T) *testenv.Env {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return env
}

func newManager(t *testing.T, cfg *rest.Config, o webhookOptions) ctrl.Manager {
	t.Helper()
	srv, err := o.server()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          srv,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

func startManager(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	NewWithT(t).Eventually(check).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), what)
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func selfSigned(t *testing.T, dnsName string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
