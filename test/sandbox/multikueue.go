package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/sandbox/procnode"
)

// MultiKueueJobManagedBy is the spec.managedBy the manager sets with
// Options.MultiKueue (--job-managed-by).
const MultiKueueJobManagedBy = "kueue.x-k8s.io/multikueue"

// WorkerClusterSecret is the Secret, in KueueNamespace of the manager
// cluster, that holds the worker cluster's kubeconfig (key "kubeconfig"),
// as config/samples/multikueue/manager-cluster.yaml's MultiKueueCluster
// names it.
const WorkerClusterSecret = "worker-cluster"

// WorkerNodeName is the worker cluster's node.
const WorkerNodeName = "worker-node"

// WorkerCluster is the MultiKueue worker cluster (Options.MultiKueue): a
// control plane of its own (etcd, kube-apiserver, kube-controller-manager,
// with a CA of its own), a process node, and Kueue, which admits the Jobs
// MultiKueue creates there. It shares the registry and fixture servers on
// loopback with the manager cluster, as two clusters share a registry.
type WorkerCluster struct {
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	Kube       kubernetes.Interface

	cp         *controlPlane
	kueue      *proc
	nodeCancel context.CancelFunc
	nodeDone   chan error
	// node builds a fresh process node (StartNode after StopNode).
	node func() (*procnode.Node, error)
}

// Worker is the MultiKueue worker cluster, or nil without
// Options.MultiKueue.
func (s *Sandbox) Worker() *WorkerCluster { return s.worker }

// startWorkerCluster brings up the worker cluster, runs Kueue on it, and
// connects the manager cluster's Kueue to it: the kubeconfig Secret, then
// config/samples/multikueue (manager-cluster.yaml here, worker-cluster.yaml
// there).
func (s *Sandbox) startWorkerCluster(ctx context.Context) error {
	s.step("worker cluster (MultiKueue)")
	authority, err := newCA()
	if err != nil {
		return err
	}
	log, err := openLog(filepath.Join(s.logs, "worker-control-plane.log"))
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "worker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	w := &WorkerCluster{cp: &controlPlane{dir: dir, assets: s.o.Assets, log: log, ca: authority}}
	s.worker = w
	etcdURL, err := w.cp.startEtcd()
	if err != nil {
		return err
	}
	if err := w.cp.startAPIServer(etcdURL); err != nil {
		return err
	}
	if w.Kubeconfig, err = w.cp.writeKubeconfig("admin", "sandbox-admin", []string{"system:masters"}); err != nil {
		return err
	}
	if w.Config, err = restConfig(w.Kubeconfig); err != nil {
		return err
	}
	if w.Client, err = client.New(w.Config, client.Options{Scheme: controllers.NewScheme()}); err != nil {
		return err
	}
	if w.Kube, err = kubernetes.NewForConfig(w.Config); err != nil {
		return err
	}
	if err := w.cp.startControllerManager(); err != nil {
		return err
	}
	nodeLog, err := openLog(filepath.Join(s.logs, "worker-node.log"))
	if err != nil {
		return err
	}
	nodeKC, err := w.cp.writeKubeconfig("node", "system:node:"+WorkerNodeName, []string{"system:masters"})
	if err != nil {
		return err
	}
	w.node = func() (*procnode.Node, error) {
		cfg, err := restConfig(nodeKC)
		if err != nil {
			return nil, err
		}
		cfg.WarningHandler = rest.NoWarnings{}
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		kubelet, err := w.cp.kubeletTLS()
		if err != nil {
			return nil, err
		}
		images := map[string]procnode.Image{WorkerImage: WorkerImageMapping(s.o.WorkerBin)}
		for k, v := range s.o.Images {
			images[k] = v
		}
		return procnode.New(procnode.Options{
			Name: WorkerNodeName, Dir: filepath.Join(dir, "node"), Client: kube, Log: nodeLog, Images: images, Kubelet: kubelet,
		}), nil
	}
	if err := w.StartNode(); err != nil {
		return err
	}
	if w.kueue, err = s.runKueue(ctx, kueueCluster{name: "worker-kueue", cp: w.cp, config: w.Config, client: w.Client}); err != nil {
		return err
	}
	if err := applyFile(ctx, w.Client, filepath.Join(s.o.RepoRoot, MultiKueueSamples, "worker-cluster.yaml"), ""); err != nil {
		return err
	}
	return s.connectWorker(ctx)
}

// MultiKueueSamples holds the MultiKueue manifests the sandbox and
// test/e2e/multikueue apply, and docs/how-to/worker-clusters-multikueue.md
// shows.
const MultiKueueSamples = "config/samples/multikueue"

// connectWorker gives the manager cluster's Kueue the worker's kubeconfig
// and applies manager-cluster.yaml. The kubeconfig embeds a client
// certificate of the worker's CA with admin rights, and its CA data:
// Kueue v0.17 refuses a kubeconfig that names files (certificate-authority
// paths, tokenFile) or skips TLS verification (MultiKueueCluster
// condition Active=False, reason InsecureKubeConfig). A production setup
// gives MultiKueue a ServiceAccount limited to Jobs and Workloads (see
// the docs); the sandbox's identity is an admin of a throwaway cluster.
func (s *Sandbox) connectWorker(ctx context.Context) error {
	kc, err := s.worker.cp.writeKubeconfig("multikueue", "multikueue", []string{"system:masters"})
	if err != nil {
		return err
	}
	b, err := os.ReadFile(kc)
	if err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: WorkerClusterSecret, Namespace: KueueNamespace},
		Data:       map[string][]byte{"kubeconfig": b},
	}
	if err := s.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return applyFile(ctx, s.Client, filepath.Join(s.o.RepoRoot, MultiKueueSamples, "manager-cluster.yaml"), "")
}

// StopNode stops the worker cluster's node: its pods' processes are
// killed (SIGTERM, then SIGKILL) and reported as terminated, as a node
// that shuts down with its kubelet's graceful shutdown does; the Node
// object stays, as it does when a node goes down.
func (w *WorkerCluster) StopNode() {
	if w.nodeCancel != nil {
		w.nodeCancel()
		<-w.nodeDone
		w.nodeCancel = nil
	}
}

// StartNode starts (or restarts) the worker cluster's node and waits until
// it is Ready.
func (w *WorkerCluster) StartNode() error {
	n, err := w.node()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.nodeCancel, w.nodeDone = cancel, make(chan error, 1)
	go func() { w.nodeDone <- n.Run(ctx) }()
	return poll(60*time.Second, func() error {
		select {
		case err := <-w.nodeDone:
			w.nodeDone <- err
			return backoffStop{fmt.Errorf("worker node stopped: %v", err)}
		default:
		}
		node, err := w.Kube.CoreV1().Nodes().Get(context.Background(), WorkerNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && time.Since(c.LastHeartbeatTime.Time) < time.Minute {
				return nil
			}
		}
		return errNotReady
	})
}

// Namespace creates namespace ns on the worker cluster (MultiKueue creates
// the Jobs it dispatches in the namespace they have on the manager
// cluster, and creates no namespace).
func (w *WorkerCluster) Namespace(ctx context.Context, ns string) error {
	err := w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (w *WorkerCluster) stop() {
	if w == nil {
		return
	}
	if w.kueue != nil {
		w.kueue.stop(5 * time.Second)
		w.kueue = nil
	}
	w.StopNode()
	w.cp.stop()
}

// ApplyFile server-side-applies every document of a YAML file with c; a
// non-empty namespace is set on each.
func ApplyFile(ctx context.Context, c client.Client, path, namespace string) error {
	return applyFile(ctx, c, path, namespace)
}

func applyFile(ctx context.Context, c client.Client, path, namespace string) error {
	b, err := os.ReadFile(path)
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
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if namespace != "" {
			u.SetNamespace(namespace)
		}
		if err := applyTo(ctx, c, u); err != nil {
			return fmt.Errorf("%s: applying %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
}
