package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KueueNamespace is where Kueue keeps its events and state, as its own
// manifests install it.
const KueueNamespace = "kueue-system"

// startKueue installs Kueue's CRDs from its module and runs its manager
// (Options.KueueDir, from test/tools/kueue.sh) as a process with an admin
// identity, as its manifests run it with a ClusterRole of its own.
//
// Certificates: Kueue's internal certificate management is off; the
// sandbox CA issues its webhook serving certificate for 127.0.0.1, and
// Kueue's own Mutating/ValidatingWebhookConfigurations are registered
// with that CA and a URL on loopback (the manifests name a Service, which
// nothing routes here). Only the webhooks of the batch/job integration and
// of Kueue's own kinds are registered: the manifests also hold webhooks for
// Pods, Deployments and StatefulSets, which would send every Pod the
// process node runs through Kueue.
//
// Kueue v0.17 with internal certificate management off always loads a
// metrics certificate from the fixed path /etc/kueue/metrics/certs (see
// cmd/kueue/main.go), so it runs in a private mount namespace whose /etc
// is an overlay holding that certificate: the host's /etc is untouched.
// That needs unshare(1) and the right to mount (root, as CI runs).
func (s *Sandbox) startKueue(ctx context.Context) error {
	s.step("Kueue")
	p, err := s.runKueue(ctx, kueueCluster{name: "kueue", cp: s.cp, config: s.Config, client: s.Client, multiKueue: s.o.MultiKueue})
	s.kueue = p
	return err
}

// kueueCluster is where runKueue runs Kueue: the sandbox's own cluster or
// its MultiKueue worker cluster (multikueue.go).
type kueueCluster struct {
	// name names Kueue's folder under Dir and its log.
	name   string
	cp     *controlPlane
	config *rest.Config
	client client.Client
	// multiKueue: this Kueue dispatches to worker clusters (the manager
	// cluster's); see kueueConfig.
	multiKueue bool
}

// runKueue installs Kueue on cl and runs it; see startKueue.
func (s *Sandbox) runKueue(ctx context.Context, cl kueueCluster) (*proc, error) {
	if _, err := envtest.InstallCRDs(cl.config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(s.o.KueueDir, "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("installing Kueue CRDs: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if err := cl.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	dir := filepath.Join(s.Dir, cl.name)
	certDir, etc := filepath.Join(dir, "certs"), filepath.Join(dir, "etc")
	for _, d := range []string{certDir, etc} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cert, key, err := cl.cp.ca.issue("kueue-webhook", nil, true)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), cert, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), key, 0o600); err != nil {
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	webhookPort, healthPort, visibilityPort := ports[0], ports[1], ports[2]
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(kueueConfig(webhookPort, healthPort, certDir, cl.multiKueue)), 0o600); err != nil {
		return nil, err
	}
	kc, err := cl.cp.writeKubeconfig("kueue", "kueue", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	log, err := openLog(filepath.Join(s.logs, cl.name+".log"))
	if err != nil {
		return nil, err
	}
	// sh, in the new mount namespace: /etc becomes an overlay (on a tmpfs
	// of its own) that holds the metrics certificate, then Kueue runs.
	script := `set -e
mount -t tmpfs tmpfs "$1"
mkdir "$1/upper" "$1/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
mkdir -p /etc/kueue/metrics/certs
cp "$2/tls.crt" "$2/tls.key" /etc/kueue/metrics/certs/
shift 2
exec "$@"`
	p, err := startProc(cl.name, log, append(os.Environ(), "KUBECONFIG="+kc), "unshare",
		"--mount", "--propagation", "private", "sh", "-c", script, "sh", etc, certDir,
		filepath.Join(s.o.KueueDir, "kueue"), "--config="+config, "--visibility-server-port="+strconv.Itoa(visibilityPort))
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(healthPort) + "/readyz"
	if err := waitFor(p, 90*time.Second, func() error { return httpOK(http.DefaultClient, url) }); err != nil {
		p.stop(time.Second)
		return nil, fmt.Errorf("%s: %w (see %s)", cl.name, err, filepath.Join(s.logs, cl.name+".log"))
	}
	if err := s.installKueueWebhooks(ctx, cl, webhookPort); err != nil {
		p.stop(time.Second)
		return nil, err
	}
	return p, nil
}

// kueueConfig is Kueue's Configuration (config.kueue.x-k8s.io/v1beta2, as
// config/components/manager/controller_manager_config.yaml of v0.17) for
// a process on loopback: the batch/job integration only, no leader
// election, webhooks on 127.0.0.1 with the sandbox's certificate. The
// on-demand visibility API server is off: it is an aggregated API that
// loads its certificate from the fixed path /visibility, and nothing here
// reads pending workloads through it.
//
// multiKueue adds MultiKueue's settings (the MultiKueue feature gate is on
// by default since v0.9, and MultiKueueBatchJobWithManagedBy is GA and
// locked on in v0.17): a short garbage-collection interval and a short
// workerLostTimeout, so that a lost worker cluster shows within a test's
// patience rather than after the default 15 minutes.
func kueueConfig(webhookPort, healthPort int, certDir string, multiKueue bool) string {
	mk := ""
	if multiKueue {
		mk = `multiKueue:
  gcInterval: 30s
  origin: packline-sandbox
  workerLostTimeout: 1m
`
	}
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - batch/job
featureGates:
  VisibilityOnDemand: false
%s`, KueueNamespace, healthPort, webhookPort, certDir, mk)
}

// installKueueWebhooks registers Kueue's own webhook configurations
// (config/components/webhook/manifests.yaml), named with the kueue- prefix
// of its default install, pointed at the process on loopback.
func (s *Sandbox) installKueueWebhooks(ctx context.Context, cl kueueCluster, port int) error {
	b, err := os.ReadFile(filepath.Join(s.o.KueueDir, "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading Kueue's webhook manifests: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := kueueWebhooksOnLoopback(u, port, cl.cp.ca.certPEM); err != nil {
			return err
		}
		if err := applyTo(ctx, cl.client, u); err != nil {
			return fmt.Errorf("installing %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// kueueWebhooksOnLoopback keeps the webhooks of Kueue's kinds and of
// batch Jobs, and points each at https://127.0.0.1:port<its path>.
func kueueWebhooksOnLoopback(u *unstructured.Unstructured, port int, caPEM []byte) error {
	u.SetName("kueue-" + u.GetName())
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	var kept []any
	for _, h := range hooks {
		m, _ := h.(map[string]any)
		if !kueueWebhookKept(m) {
			continue
		}
		path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
		m["clientConfig"] = map[string]any{
			"url":      "https://127.0.0.1:" + strconv.Itoa(port) + path,
			"caBundle": base64.StdEncoding.EncodeToString(caPEM),
		}
		kept = append(kept, m)
	}
	return unstructured.SetNestedSlice(u.Object, kept, "webhooks")
}

func kueueWebhookKept(hook map[string]any) bool {
	rules, _, _ := unstructured.NestedSlice(hook, "rules")
	for _, r := range rules {
		groups, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "apiGroups")
		for _, g := range groups {
			if g == "batch" || strings.HasSuffix(g, "kueue.x-k8s.io") {
				return true
			}
		}
	}
	return false
}

// stopKueue ends Kueue's manager.
func (s *Sandbox) stopKueue() {
	if s.kueue != nil {
		s.kueue.stop(5 * time.Second)
		s.kueue = nil
	}
}

// KueueDefault is the Kueue build for Options.KueueDir: PACKLINE_KUEUE_DIR,
// or test/tools/kueue.sh (a cached build).
func KueueDefault(root string) (string, error) {
	if dir := os.Getenv("PACKLINE_KUEUE_DIR"); dir != "" {
		return dir, nil
	}
	return script(root, "kueue.sh")
}
