package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/packline/packline/controllers/admission"
)

// How the webhook serving certificate gets into --webhook-cert-dir.
const (
	// certsSelf: the manager creates a CA and a serving certificate, keeps
	// them in its Secret (mounted at the cert dir), renews them, and writes
	// the CA into the webhook configurations (open-policy-agent's
	// cert-controller, as Kueue and Gatekeeper do).
	certsSelf = "self"
	// certsExternal: something else (cert-manager, see config/certmanager)
	// writes tls.crt and tls.key into the cert dir and the CA bundle into
	// the webhook configurations; the manager only serves.
	certsExternal = "external"
)

// webhookOptions are the --webhook-* flags.
type webhookOptions struct {
	Enabled      bool
	Host         string
	Port         int
	CertDir      string
	Provisioning string
	// Namespace holds the Service and the certificate Secret (self only).
	Namespace   string
	SecretName  string
	ServiceName string
	// MutatingName and ValidatingName are the webhook configurations that
	// get the CA bundle (self only).
	MutatingName, ValidatingName string
	// ClientCA is the CA file of the API server's webhook client
	// certificate; ClientNames narrows which of its certificates are taken.
	ClientCA    string
	ClientNames string
	// InsecureSkipClientVerify serves without client certificates.
	InsecureSkipClientVerify bool
	// rotatorName names the cert-controller controller; controller names
	// are unique per process, so tests that start several managers set it.
	rotatorName string
}

func defaultWebhookOptions() webhookOptions {
	return webhookOptions{
		Enabled:        true,
		Port:           webhook.DefaultPort,
		CertDir:        filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
		Provisioning:   certsSelf,
		SecretName:     "packline-webhook-server-cert",
		ServiceName:    "packline-webhook-service",
		MutatingName:   "packline-mutating-webhook-configuration",
		ValidatingName: "packline-validating-webhook-configuration",
	}
}

func (o *webhookOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Enabled, "enable-webhooks", o.Enabled, "Serve the admission webhooks (who asked for a Claim or Artifact, and whether they may). Without them, Artifacts and Claims that name a Secret, PVC or Artifact, and Claims of templates that restrict who may claim them, are Stalled (EntitlementUnverified), unless --webhook-cert-dir holds the serving key of the manager that serves the webhooks.")
	fs.StringVar(&o.Host, "webhook-host", o.Host, "Address the webhook server binds (default: all interfaces).")
	fs.IntVar(&o.Port, "webhook-port", o.Port, "Port of the webhook server.")
	fs.StringVar(&o.CertDir, "webhook-cert-dir", o.CertDir, "Folder holding the webhook serving certificate (tls.crt, tls.key; with self provisioning also ca.crt, ca.key): the certificate Secret's volume.")
	fs.StringVar(&o.Provisioning, "webhook-cert-provisioning", o.Provisioning, "Who provisions the webhook serving certificate: self (the manager creates and rotates it in --webhook-secret-name and injects the CA into the webhook configurations) or external (e.g. cert-manager; the manager only serves the files in --webhook-cert-dir).")
	fs.StringVar(&o.Namespace, "webhook-namespace", o.Namespace, "Namespace of the webhook Service and certificate Secret (default: $POD_NAMESPACE).")
	fs.StringVar(&o.SecretName, "webhook-secret-name", o.SecretName, "Secret that holds the self-provisioned CA and serving certificate.")
	fs.StringVar(&o.ServiceName, "webhook-service-name", o.ServiceName, "Service in front of the webhook server; the certificate is for <service>.<namespace>.svc.")
	fs.StringVar(&o.ClientCA, "webhook-client-ca", o.ClientCA, "CA file (PEM) of the client certificate the API server presents to webhooks (its AdmissionConfiguration's kubeconfig, see the README); the webhook server takes only clients with a certificate it issued. Required unless --webhook-insecure-skip-client-verify.")
	fs.StringVar(&o.ClientNames, "webhook-client-names", o.ClientNames, "Comma-separated common or DNS names, one of which the client certificate must carry (default: any certificate of --webhook-client-ca).")
	fs.BoolVar(&o.InsecureSkipClientVerify, "webhook-insecure-skip-client-verify", o.InsecureSkipClientVerify, "Serve the webhooks to any client, without a client certificate. Anyone who reaches the webhook port can then get a requester seal for any user; use only where no tenant can reach it.")
	fs.StringVar(&o.MutatingName, "mutating-webhook-configuration", o.MutatingName, "MutatingWebhookConfiguration that gets the self-provisioned CA bundle.")
	fs.StringVar(&o.ValidatingName, "validating-webhook-configuration", o.ValidatingName, "ValidatingWebhookConfiguration that gets the self-provisioned CA bundle.")
}

// complete checks the flags and fills in the namespace.
func (o *webhookOptions) complete() error {
	if !o.Enabled {
		return nil
	}
	if o.Port <= 0 || o.Port > 65535 {
		return fmt.Errorf("--webhook-port %d is not a port", o.Port)
	}
	if o.CertDir == "" {
		return errors.New("--webhook-cert-dir must not be empty")
	}
	if o.ClientCA == "" && !o.InsecureSkipClientVerify {
		return errors.New("--webhook-client-ca is not set: the webhook server must take only the API server's client certificate, or anyone who reaches it can get a requester seal for any user. " +
			"Give the API server a webhook client certificate (the AdmissionConfiguration in docs/operations/install.md) and its CA in --webhook-client-ca, or set --webhook-insecure-skip-client-verify where no tenant can reach the webhook port")
	}
	switch o.Provisioning {
	case certsExternal:
		return nil
	case certsSelf:
	default:
		return fmt.Errorf("--webhook-cert-provisioning must be %q or %q, not %q", certsSelf, certsExternal, o.Provisioning)
	}
	if o.Namespace == "" {
		o.Namespace = os.Getenv("POD_NAMESPACE")
	}
	if o.Namespace == "" {
		return errors.New("--webhook-cert-provisioning=self needs the manager's namespace (--webhook-namespace or $POD_NAMESPACE) for its certificate Secret")
	}
	for flagName, v := range map[string]string{"--webhook-secret-name": o.SecretName, "--webhook-service-name": o.ServiceName,
		"--mutating-webhook-configuration": o.MutatingName, "--validating-webhook-configuration": o.ValidatingName} {
		if v == "" {
			return fmt.Errorf("%s must not be empty with --webhook-cert-provisioning=self", flagName)
		}
	}
	return nil
}

// server is the manager's webhook server. controller-runtime starts it only
// once a handler is registered, which setupWebhooks defers until the
// certificate is in the cert dir.
func (o webhookOptions) server() (webhook.Server, error) {
	var auth *admission.ClientAuth
	if o.ClientCA != "" {
		auth = &admission.ClientAuth{CAFile: o.ClientCA}
		for _, n := range strings.Split(o.ClientNames, ",") {
			if n = strings.TrimSpace(n); n != "" {
				auth.Names = append(auth.Names, n)
			}
		}
	}
	opt, err := admission.ServerTLS(auth)
	if err != nil {
		return nil, fmt.Errorf("--webhook-client-ca: %w", err)
	}
	return webhook.NewServer(webhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir, TLSOpts: []func(*tls.Config){opt}}), nil
}

// registerFunc registers the admission handlers (admission.Setup).
type registerFunc func(mgr ctrl.Manager, certDir string) error

// setupWebhooks provisions the serving certificate as o says and, once it
// is in the cert dir (and, self-provisioned, its CA is in both webhook
// configurations), registers the handlers, which starts the webhook server.
// The returned check is the manager's readiness: a replica is taken into
// the webhook Service only when it serves, as in Kueue.
func setupWebhooks(mgr ctrl.Manager, o webhookOptions, register registerFunc) (healthz.Checker, error) {
	certsReady := make(chan struct{})
	switch o.Provisioning {
	case certsSelf:
		if err := addCertRotator(mgr, o, certsReady); err != nil {
			return nil, fmt.Errorf("webhook certificate rotation: %w", err)
		}
	case certsExternal:
		if err := mgr.Add(everyReplica(func(ctx context.Context) error {
			return waitForCertFiles(ctx, o.CertDir, certsReady)
		})); err != nil {
			return nil, err
		}
	}
	served := make(chan struct{})
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		select {
		case <-certsReady:
		case <-ctx.Done():
			return nil
		}
		if err := register(mgr, o.CertDir); err != nil {
			return fmt.Errorf("registering the admission webhooks: %w", err)
		}
		ctrl.Log.WithName("webhooks").Info("serving the admission webhooks", "port", o.Port, "certDir", o.CertDir)
		close(served)
		return nil
	})); err != nil {
		return nil, err
	}
	// Once the server has answered, it is not dialled again: with
	// --webhook-client-ca each dial (without a client certificate) is a
	// refused handshake in the log, every probe period.
	var listening atomic.Bool
	return func(req *http.Request) error {
		select {
		case <-served:
		default:
			return errors.New("the webhook serving certificate is not ready yet")
		}
		if listening.Load() {
			return nil
		}
		if err := mgr.GetWebhookServer().StartedChecker()(req); err != nil {
			return err
		}
		listening.Store(true)
		return nil
	}, nil
}

// addCertRotator runs cert-controller's rotator on every replica (not only
// the leader: every replica serves the webhooks and must see a renewal).
func addCertRotator(mgr ctrl.Manager, o webhookOptions, ready chan struct{}) error {
	return rotator.AddRotator(&nameScopedManager{Manager: mgr, config: nameScopedConfig(mgr.GetConfig(), o)}, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:        o.CertDir,
		CAName:         "packline-webhook-ca",
		CAOrganization: "packline",
		DNSName:        fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", o.ServiceName, o.Namespace)},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.MutatingName, Type: rotator.Mutating},
			{Name: o.ValidatingName, Type: rotator.Validating},
		},
		// Inject a new CA only once this replica serves the matching
		// certificate, so the API server never trusts a CA nobody serves.
		EnableReadinessCheck:  true,
		RequireLeaderElection: false,
		FieldOwner:            "packline-manager",
		ControllerName:        o.rotatorName,
	})
}

// nameScopedManager is the manager as cert-controller sees it: the same,
// except that its config lists and watches by name (nameScopedConfig).
// AddRotator builds its own cache from GetConfig; everything else (client,
// scheme, mapper, Add) is the manager's own.
type nameScopedManager struct {
	ctrl.Manager
	config *rest.Config
}

func (m *nameScopedManager) GetConfig() *rest.Config { return m.config }

// nameScopedConfig makes cert-controller's cache work with RBAC limited by
// resourceNames. Its informers list and watch every Secret in the namespace
// and every webhook configuration in the cluster; RBAC authorizes a list or
// watch with resourceNames only when the request selects that one name with
// a metadata.name field selector. cert-controller does not expose its cache
// options, so the selector is added on the wire, to exactly those three
// collections. The manager's own Role then names its one Secret and its two
// webhook configurations, and nothing else.
func nameScopedConfig(cfg *rest.Config, o webhookOptions) *rest.Config {
	out := rest.CopyConfig(cfg)
	names := map[string]string{
		"/api/v1/namespaces/" + o.Namespace + "/secrets":                        o.SecretName,
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations":   o.MutatingName,
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": o.ValidatingName,
	}
	wrap := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return &nameSelector{next: rt, names: names}
	}
	return out
}

// nameSelector adds fieldSelector=metadata.name=<name> to list and watch
// requests on the collections in names (path suffix, so an API server
// behind a path prefix works too).
type nameSelector struct {
	next  http.RoundTripper
	names map[string]string
}

func (t *nameSelector) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return t.next.RoundTrip(req)
	}
	for collection, name := range t.names {
		if !strings.HasSuffix(req.URL.Path, collection) {
			continue
		}
		q := req.URL.Query()
		sel := "metadata.name=" + name
		if cur := q.Get("fieldSelector"); cur != "" {
			sel = cur + "," + sel
		}
		q.Set("fieldSelector", sel)
		req = req.Clone(req.Context())
		req.URL.RawQuery = q.Encode()
		break
	}
	return t.next.RoundTrip(req)
}

func (t *nameSelector) WrappedRoundTripper() http.RoundTripper { return t.next }

// waitForCertFiles closes ready once the cert dir holds a usable key pair
// (external provisioning: cert-manager's Secret may be issued after the pod
// starts, and the kubelet refreshes the volume later).
func waitForCertFiles(ctx context.Context, dir string, ready chan struct{}) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	logged := false
	for {
		_, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err == nil {
			close(ready)
			return nil
		}
		if !logged {
			ctrl.Log.WithName("webhooks").Info("waiting for the webhook serving certificate", "certDir", dir, "reason", err.Error())
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// everyReplica is a runnable that runs whether or not this replica leads.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }
