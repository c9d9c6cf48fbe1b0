// Package procnode is the sandbox's stand-in for a kubelet. It registers a
// Node, binds pending pods to it (there is no scheduler and only one node),
// and runs each container as a host process: the image is looked up in a
// mapping to a local binary, env valueFrom is resolved, volumes become local
// folders and files, and the termination message is read from a file. It
// writes pod status the way a kubelet does, so the real Job controller
// completes or fails Jobs from it.
package procnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// Image is what a container image means on this node.
type Image struct {
	// Binary is the host executable standing for the image's entrypoint;
	// container args are passed to it, and so is a container command
	// (its first element, a path inside the image, is replaced by Binary).
	Binary string
	// Env is the image's own environment (Dockerfile ENV).
	Env []string
	// PathEnv relocates fixed pod paths for programs that read them
	// directly: when a container mounts a volume at one of these paths (or
	// uses it as its terminationMessagePath), the named variable is set to
	// the local folder or file standing in for it.
	PathEnv map[string]string
}

// Options configure a Node.
type Options struct {
	// Name of the Node object.
	Name string
	// Dir holds persistent volumes, pod volumes, logs and termination files.
	Dir    string
	Images map[string]Image
	Client kubernetes.Interface
	// Log receives one line per pod lifecycle step.
	Log io.Writer
	// Kubelet, when set, serves the containers' logs to the API server
	// (logs.go) with this TLS config, so `kubectl logs` works.
	Kubelet *tls.Config
}

// Node runs pods as processes.
type Node struct {
	o        Options
	pods     listerscorev1.PodLister
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	// scheduler records the events kube-scheduler would (bind).
	scheduler record.EventRecorder

	mu   sync.Mutex
	runs map[types.UID]*podRun
	wg   sync.WaitGroup

	// Pod addresses (network.go) and Secret volume refreshes (refresh.go).
	ipMu    sync.Mutex
	ips     map[types.UID]string
	nextIP  uint32
	secrets listerscorev1.SecretLister

	// kubeletPort is where logs.go serves; zero when it does not.
	kubeletPort int
}

// New returns a Node; Run starts it.
func New(o Options) *Node {
	if o.Log == nil {
		o.Log = io.Discard
	}
	// Containers run in their own working dirs, where a relative binary
	// path would not resolve.
	images := map[string]Image{}
	for k, img := range o.Images {
		if abs, err := filepath.Abs(img.Binary); err == nil {
			img.Binary = abs
		}
		images[k] = img
	}
	o.Images = images
	return &Node{o: o, runs: map[types.UID]*podRun{}}
}

// Run registers the Node and works until ctx ends; then it kills every
// process it started and waits for them.
func (n *Node) Run(ctx context.Context) error {
	if n.o.Kubelet != nil {
		port, err := n.serveLogs(ctx)
		if err != nil {
			return err
		}
		n.kubeletPort = port
	}
	if err := n.register(ctx); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.o.Client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	n.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.o.Name})
	n.scheduler = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: corev1.DefaultSchedulerName})

	factory := informers.NewSharedInformerFactory(n.o.Client, 0)
	inf := factory.Core().V1().Pods()
	n.pods = inf.Lister()
	n.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			n.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	secretsSynced, err := n.watchSecrets(factory)
	if err != nil {
		return err
	}
	claimsSynced, err := n.watchClaims(factory)
	if err != nil {
		return err
	}
	managed := managedSlices(n)
	eps, epsSynced, err := n.startEndpoints(factory, managed)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	managed.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), append(epsSynced, inf.Informer().HasSynced, secretsSynced, claimsSynced)...) {
		return ctx.Err()
	}
	var workers sync.WaitGroup
	for range 4 {
		workers.Add(1)
		go func() { defer workers.Done(); n.work(ctx) }()
	}
	workers.Add(1)
	go func() { defer workers.Done(); eps.run(ctx) }()
	<-ctx.Done()
	n.queue.ShutDown()
	eps.queue.ShutDown()
	workers.Wait()
	factory.Shutdown()
	managed.Shutdown()
	n.killAll()
	return nil
}

func (n *Node) work(ctx context.Context) {
	for {
		key, quit := n.queue.Get()
		if quit {
			return
		}
		err := n.sync(ctx, key)
		switch {
		case err == nil:
			n.queue.Forget(key)
		case ctx.Err() != nil:
		default:
			n.logf("pod %s: %v (retrying)", key, err)
			n.queue.AddRateLimited(key)
		}
		n.queue.Done(key)
	}
}

// register creates or refreshes the Node object and marks it Ready.
func (n *Node) register(ctx context.Context) error {
	nodes := n.o.Client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, n.o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   n.o.Name,
			Labels: map[string]string{corev1.LabelHostname: n.o.Name, corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", n.o.Name, err)
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             resource.MustParse("2000"),
	}
	node.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "process node is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.o.Name}},
		NodeInfo:  corev1.NodeSystemInfo{OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH, KubeletVersion: "procnode", ContainerRuntimeVersion: "process://"},
	}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(n.kubeletPort)
	_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.o.Log, "%s node: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// podDir is where a pod's volumes, logs and termination files live.
func (n *Node) podDir(p *corev1.Pod) string {
	return filepath.Join(n.o.Dir, "pods", p.Namespace+"_"+p.Name+"_"+string(p.UID))
}

// claimDir is a PVC's storage. It is keyed by (namespace, claim) and never
// removed by the node, so it outlives pods like a real PersistentVolume.
func (n *Node) claimDir(ns, claim string) string {
	return filepath.Join(n.o.Dir, "pv", ns, claim)
}

func mkdir(p string) error { return os.MkdirAll(p, 0o755) }
