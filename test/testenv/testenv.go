// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest) with packline's CRDs installed, from the cached binaries that
// test/tools/k8s-assets.sh builds.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/toolcache"
	"github.com/packline/packline/test/webhookclient"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	// WebhookClient is the API server's webhook client certificate
	// (StartWithWebhooks): serve the webhooks with its CA required.
	WebhookClient webhookclient.Files
	env           *envtest.Environment
	dir           string
}

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Assets returns the folder holding kube-apiserver and etcd: from
// KUBEBUILDER_ASSETS, else by running the cached build script.
func Assets() (string, error) {
	return toolcache.Path("KUBEBUILDER_ASSETS", "k8s-assets.sh", 30*time.Minute)
}

// Start runs an apiserver, normally once per test binary from TestMain;
// stop it with Stop.
func Start() (*Env, error) { return start(false) }

// StartWithWebhooks also installs config/webhook, pointed at a local
// webhook server: serve it on Webhook().LocalServingHost/Port with the
// certificate in Webhook().LocalServingCertDir.
func StartWithWebhooks() (*Env, error) { return start(true) }

// Webhook is where the webhook server must listen (StartWithWebhooks).
func (e *Env) Webhook() *envtest.WebhookInstallOptions { return &e.env.WebhookInstallOptions }

func start(webhooks bool) (*Env, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	var wc webhookclient.Files
	var dir string
	if webhooks {
		e.WebhookInstallOptions.Paths = []string{filepath.Join(RepoRoot(), "config", "webhook", "manifests.yaml")}
		// The API server presents a client certificate to the webhooks,
		// as docs/operations/install.md sets it up.
		if dir, err = os.MkdirTemp("", "packline-webhook-client-"); err != nil {
			return nil, err
		}
		if wc, err = webhookclient.Write(dir); err != nil {
			return nil, err
		}
		e.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", wc.AdmissionConfig)
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: e, WebhookClient: wc, dir: dir}, nil
}

// Main is a TestMain body: it starts the control plane, runs the tests and
// stops it, and exits with the tests' code.
func Main(m *testing.M, env **Env) { run(m, env, Start) }

// MainWithWebhooks is Main with StartWithWebhooks.
func MainWithWebhooks(m *testing.M, env **Env) { run(m, env, StartWithWebhooks) }

func run(m *testing.M, env **Env, startFn func() (*Env, error)) {
	e, err := startFn()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

// Stop shuts the control plane down.
func (e *Env) Stop() error {
	if e.dir != "" {
		defer os.RemoveAll(e.dir)
	}
	return e.env.Stop()
}

// FluxDir returns the folder holding Flux's source-controller and
// kustomize-controller binaries and their CRDs (crds/): from
// PACKLINE_FLUX_DIR, else by running the cached build script.
func FluxDir() (string, error) {
	return toolcache.Path("PACKLINE_FLUX_DIR", "flux.sh", 30*time.Minute)
}
