// Package sandbox runs packline's whole stack on one machine, without a
// container runtime: etcd, kube-apiserver and kube-controller-manager from
// the cached binaries, a distribution registry on loopback, a process node
// standing in for the kubelet (test/sandbox/procnode), a Hugging Face
// fixture server, and the packline manager binary. `make demo` (cmd/sandbox)
// and the e2e suite (test/e2e) both use it.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/sandbox/procnode"
)

// WorkerImage is the image name the manager puts into Jobs and the process
// node maps to the worker binary.
const WorkerImage = "packline.local/worker:sandbox"

// ManagerUser is the identity of the manager's client certificate; it is
// bound to the ClusterRole in config/rbac/role.yaml and nothing else, so the
// sandbox proves that role is enough (and holds no Secret access).
const ManagerUser = "packline-manager"

// Options configure Start.
type Options struct {
	// Dir holds every component's state and log; a temp dir when empty.
	Dir string
	// RepoRoot is the packline checkout (CRDs, RBAC, samples, scripts).
	RepoRoot string
	// Assets holds etcd, kube-apiserver and kube-controller-manager.
	Assets string
	// RegistryBin is the distribution registry binary.
	RegistryBin string
	// ManagerBin and WorkerBin are the built cmd/manager and cmd/worker.
	ManagerBin, WorkerBin string
	// ManagerArgs are extra manager flags (backoffs, TTL).
	ManagerArgs []string
	// NoWebhooks runs the manager with --enable-webhooks=false and installs
	// no webhook configuration: Artifacts and Claims that name a Secret,
	// PVC or Artifact then stall with EntitlementUnverified, unless
	// ManagerArgs has --insecure-unverified-references. By default the
	// manager serves the admission webhooks to the API server, which
	// presents its webhook client certificate (see installWebhooks).
	NoWebhooks bool
	// FluxDir holds Flux's controllers and CRDs (test/tools/flux.sh); when
	// set, the sandbox runs them, so delivered Claims are applied.
	FluxDir string
	// KueueDir holds Kueue's manager, CRDs and webhook manifests
	// (test/tools/kueue.sh, KueueDefault); when set, the sandbox runs Kueue
	// (see startKueue) before the packline manager.
	KueueDir string
	// MultiKueue (with KueueDir) starts a second cluster as a MultiKueue
	// worker (see WorkerCluster) and connects the manager cluster's Kueue
	// to it; the manager runs with --job-managed-by=kueue.x-k8s.io/multikueue.
	MultiKueue bool
	// Images are extra images the process node runs, besides the worker.
	Images map[string]procnode.Image
	// Node is "" (the process node) or NodeReal: a kubelet, containerd with
	// runc, CNI and kube-scheduler from RealNode, with the registry and the
	// fixtures on the pod bridge's gateway address (see realnode.go).
	Node string
	// RealNode are the real node's binaries (Defaults fills them in).
	RealNode RealNodeAssets
	// WorkerImage is a worker image already in the registry for the real
	// node; empty, the sandbox builds it as `make images` does and pushes it.
	WorkerImage string
	// Progress receives one line per step; component logs go to Dir/logs.
	Progress io.Writer
}

// Sandbox is a running stack.
type Sandbox struct {
	Dir string
	// Kubeconfig is an admin kubeconfig for kubectl and clients.
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	Kube       kubernetes.Interface
	Registry   *Registry
	HF         *hfserver.Server

	o          Options
	cp         *controlPlane
	logs       string
	nodeCancel context.CancelFunc
	nodeDone   chan error
	manager    *proc
	flux       []*proc
	kueue      *proc
	worker     *WorkerCluster
	managerKC  string
	ownDir     bool

	// The manager process's webhook server (installWebhooks).
	webhookPort    int
	webhookCertDir string
	mirrorCancel   context.CancelFunc

	// The real node (Options.Node == NodeReal) and the worker image the
	// manager runs.
	real        *realNode
	workerImage string
}

// Start brings the stack up; on error everything started is stopped again.
func Start(ctx context.Context, o Options) (s *Sandbox, err error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	for _, p := range []*string{&o.ManagerBin, &o.WorkerBin, &o.RegistryBin, &o.Assets, &o.RepoRoot, &o.FluxDir, &o.KueueDir} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return nil, err
			}
		}
	}
	s = &Sandbox{o: o, Dir: o.Dir, workerImage: WorkerImage}
	if o.WorkerImage != "" {
		s.workerImage = o.WorkerImage
	}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "packline-sandbox-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	// The started stack, even when an error return has set s to nil.
	started := s
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	s.logs = filepath.Join(s.Dir, "logs")
	if err := os.MkdirAll(s.logs, 0o755); err != nil {
		return nil, err
	}
	if err := s.startControlPlane(); err != nil {
		return nil, err
	}
	if err := s.install(ctx); err != nil {
		return nil, err
	}
	if o.Node == NodeReal {
		if err := s.prepareRealNode(); err != nil {
			return nil, err
		}
	}
	s.step("registry")
	regLog, err := openLog(filepath.Join(s.logs, "registry.log"))
	if err != nil {
		return nil, err
	}
	if s.Registry, err = StartRegistry(RegistryOptions{Dir: filepath.Join(s.Dir, "registry"), Bin: o.RegistryBin, Log: regLog, IP: s.ServeIP()}); err != nil {
		return nil, err
	}
	if s.HF, err = hfserver.StartOn(s.ServeIP(), map[string]hfserver.Repo{"packline/tiny-model": hfserver.TinyModel()}); err != nil {
		return nil, err
	}
	if o.Node == NodeReal {
		err = s.startRealNode(ctx)
	} else {
		err = s.startNode()
	}
	if err != nil {
		return nil, err
	}
	if o.KueueDir != "" {
		// Before the manager, which watches Workloads only if the
		// cluster serves them when it starts.
		if err := s.startKueue(ctx); err != nil {
			return nil, err
		}
		if o.MultiKueue {
			if err := s.startWorkerCluster(ctx); err != nil {
				return nil, err
			}
		}
	}
	if o.FluxDir != "" {
		// Before the manager, so that it watches delivered Claims' Flux
		// objects from the start.
		if err := s.startFlux(); err != nil {
			return nil, err
		}
	}
	if o.ManagerBin != "" {
		if err := s.StartManager(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Sandbox) startControlPlane() error {
	authority, err := newCA()
	if err != nil {
		return err
	}
	log, err := openLog(filepath.Join(s.logs, "control-plane.log"))
	if err != nil {
		return err
	}
	s.cp = &controlPlane{dir: s.Dir, assets: s.o.Assets, log: log, ca: authority, realNode: s.o.Node == NodeReal}
	s.step("etcd")
	etcdURL, err := s.cp.startEtcd()
	if err != nil {
		return err
	}
	s.step("kube-apiserver")
	if err := s.cp.startAPIServer(etcdURL); err != nil {
		return err
	}
	if s.Kubeconfig, err = s.cp.writeKubeconfig("admin", "sandbox-admin", []string{"system:masters"}); err != nil {
		return err
	}
	if s.Config, err = restConfig(s.Kubeconfig); err != nil {
		return err
	}
	if s.Client, err = client.New(s.Config, client.Options{Scheme: controllers.NewScheme()}); err != nil {
		return err
	}
	if s.Kube, err = kubernetes.NewForConfig(s.Config); err != nil {
		return err
	}
	s.step("kube-controller-manager")
	return s.cp.startControllerManager()
}

// install applies the CRDs and the manager's ClusterRole and binding.
func (s *Sandbox) install(ctx context.Context) error {
	s.step("CRDs and RBAC")
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(s.o.RepoRoot, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(s.o.RepoRoot, "config", "rbac", "role.yaml"))
	if err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: ManagerUser}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if s.managerKC, err = s.cp.writeKubeconfig("manager", ManagerUser, nil); err != nil {
		return err
	}
	// Only for a manager process of the sandbox's own: test/deploy installs
	// config/default itself, webhooks included, and runs the manager as pods.
	if s.o.ManagerBin != "" && !s.o.NoWebhooks {
		return s.installWebhooks(ctx)
	}
	return nil
}

// startNode runs the process node in-process, with its own client
// identity as a kubelet would have.
func (s *Sandbox) startNode() error {
	s.step("process node")
	kc, err := s.cp.writeKubeconfig("node", "system:node:process-node", []string{"system:masters"})
	if err != nil {
		return err
	}
	cfg, err := restConfig(kc)
	if err != nil {
		return err
	}
	// The node publishes FQDN EndpointSlices (see procnode), which the API
	// server answers with a deprecation warning on every write.
	cfg.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	log, err := openLog(filepath.Join(s.logs, "node.log"))
	if err != nil {
		return err
	}
	images := map[string]procnode.Image{WorkerImage: WorkerImageMapping(s.o.WorkerBin)}
	for k, v := range s.o.Images {
		images[k] = v
	}
	kubelet, err := s.cp.kubeletTLS()
	if err != nil {
		return err
	}
	n := procnode.New(procnode.Options{
		Name: "process-node", Dir: filepath.Join(s.Dir, "node"), Client: kube, Log: log, Images: images, Kubelet: kubelet,
	})
	ctx, cancel := context.WithCancel(context.Background())
	s.nodeCancel, s.nodeDone = cancel, make(chan error, 1)
	go func() { s.nodeDone <- n.Run(ctx) }()
	// The node is usable once its Node object is Ready.
	return poll(60*time.Second, func() error {
		select {
		case err := <-s.nodeDone:
			s.nodeDone <- err
			return backoffStop{fmt.Errorf("process node stopped: %v", err)}
		default:
		}
		node := &corev1.Node{}
		if err := s.Client.Get(context.Background(), client.ObjectKey{Name: "process-node"}, node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errNotReady
	})
}

// WorkerImageMapping runs the worker binary for the worker image. The
// worker reads fixed pod paths; these variables (honoured by cmd/worker for
// this purpose) point it at the node's local folders instead.
func WorkerImageMapping(bin string) procnode.Image {
	return procnode.Image{
		Binary: bin,
		PathEnv: map[string]string{
			workerv1.WorkspaceDir:                "PACKLINE_WORKSPACE",
			workerv1.SourceAuthDir:               "PACKLINE_SOURCE_AUTH_DIR",
			workerv1.TemplateAuthDir:             "PACKLINE_TEMPLATE_AUTH_DIR",
			workerv1.SourceVolumeDir:             "PACKLINE_SOURCE_VOLUME_DIR",
			workerv1.PullAuthDir:                 "PACKLINE_PULL_AUTH_DIR",
			workerv1.SigningKeyDir:               "PACKLINE_SIGNING_KEY_DIR",
			corev1.TerminationMessagePathDefault: "PACKLINE_TERMINATION_LOG",
		},
	}
}

// Stop shuts everything down in reverse order and waits for every process.
func (s *Sandbox) Stop() {
	s.StopManager()
	s.stopFlux()
	s.stopKueue()
	s.worker.stop()
	if s.mirrorCancel != nil {
		s.mirrorCancel()
	}
	if s.nodeCancel != nil {
		s.nodeCancel()
		<-s.nodeDone
	}
	s.stopRealNode()
	if s.HF != nil {
		_ = s.HF.Close()
	}
	if s.Registry != nil {
		s.Registry.Stop()
	}
	if s.cp != nil {
		s.cp.stop()
	}
	if s.ownDir {
		_ = os.RemoveAll(s.Dir)
	}
}

// ServeIP is the address the sandbox's servers (registry, fixture hub, Git)
// listen on: loopback for the process node, whose pods are host processes;
// the bridge's gateway for the real node, whose pods reach only the bridge.
func (s *Sandbox) ServeIP() string {
	if s.o.Node == NodeReal {
		return BridgeGateway
	}
	return "127.0.0.1"
}

// NodeName is the node that runs the pods.
func (s *Sandbox) NodeName() string {
	if s.o.Node == NodeReal {
		return RealNodeName
	}
	return "process-node"
}

// WorkerImage is the image the manager runs workers with.
func (s *Sandbox) WorkerImage() string { return s.workerImage }

// Logs is the folder of component logs.
func (s *Sandbox) Logs() string { return s.logs }

func (s *Sandbox) step(what string) {
	fmt.Fprintf(s.o.Progress, "sandbox: starting %s\n", what)
}

// backoffStop ends poll early.
type backoffStop struct{ error }

func poll(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		var stop backoffStop
		if err == nil || errors.As(err, &stop) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// UserKubeconfig writes a kubeconfig for user in groups (a client
// certificate of the sandbox's CA), for tests that act as a tenant with
// only the rights RBAC grants them, as a tenant's own kubeconfig would.
func (s *Sandbox) UserKubeconfig(name, user string, groups []string) (string, error) {
	return s.cp.writeKubeconfig(name, user, groups)
}
