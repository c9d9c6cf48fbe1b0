package procnode

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// Pod network. Every pod runs on this host's network, as with hostNetwork,
// but gets an address of its own in 127.0.0.0/8 (all of it is loopback on
// Linux, and any process may bind any of it): status.podIP, the
// status.podIP fieldRef and PROCNODE_POD_IP in every container. Two
// replicas of a Deployment can then listen on the same port, each on its
// own address, if they bind that address (e.g. a flag taking
// $(PROCNODE_POD_IP)). The node's own address stays 127.0.0.1.
//
// Services. The API server refuses loopback addresses in IPv4
// EndpointSlices and Endpoints, so kube-controller-manager's endpoint
// controllers cannot publish these pods. The node does it for the pods it
// runs instead: for each Service with a selector, an EndpointSlice of
// address type FQDN (any DNS name, and a dotted quad is one) listing the
// selected pods' addresses with their readiness. Whatever resolves a
// Service through its EndpointSlices (the API server with
// --enable-aggregator-routing, for webhooks and aggregated APIs) dials them.
const (
	// PodIPEnv is set in every container to the pod's own address.
	PodIPEnv = "PROCNODE_POD_IP"
	// endpointManager marks the EndpointSlices the node writes.
	endpointManager = "procnode.packline.dev"
)

// podIP returns the pod's address, allocating the next free one the first
// time. Addresses are 127.1.0.1 onwards, never reused while the node runs,
// and skip .0 and .255 in the last octet.
func (n *Node) podIP(uid types.UID) string {
	n.ipMu.Lock()
	defer n.ipMu.Unlock()
	if ip, ok := n.ips[uid]; ok {
		return ip
	}
	if n.ips == nil {
		n.ips = map[types.UID]string{}
	}
	for {
		n.nextIP++
		if last := n.nextIP & 0xff; last != 0 && last != 0xff {
			break
		}
	}
	v := n.nextIP + 1<<16 // 127.1.0.0 + n
	ip := fmt.Sprintf("127.%d.%d.%d", (v>>16)&0xff, (v>>8)&0xff, v&0xff)
	n.ips[uid] = ip
	return ip
}

func (n *Node) releasePodIP(uid types.UID) {
	n.ipMu.Lock()
	defer n.ipMu.Unlock()
	delete(n.ips, uid)
}

// endpoints publishes the node's pods behind Services.
type endpoints struct {
	node     *Node
	services listerscorev1.ServiceLister
	pods     listerscorev1.PodLister
	slices   discoverylisters.EndpointSliceLister
	queue    workqueue.TypedRateLimitingInterface[string]
}

// startEndpoints registers the informers (started by the caller's factory)
// and returns the controller; run works its queue.
func (n *Node) startEndpoints(factory informers.SharedInformerFactory, managed informers.SharedInformerFactory) (*endpoints, []cache.InformerSynced, error) {
	e := &endpoints{
		node:     n,
		services: factory.Core().V1().Services().Lister(),
		pods:     factory.Core().V1().Pods().Lister(),
		slices:   managed.Discovery().V1().EndpointSlices().Lister(),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	svcInf := factory.Core().V1().Services().Informer()
	podInf := factory.Core().V1().Pods().Informer()
	sliceInf := managed.Discovery().V1().EndpointSlices().Informer()
	enqueueService := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			e.queue.Add(key)
		}
	}
	// A pod change concerns the Services of its namespace.
	enqueuePod := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		svcs, _ := e.services.Services(pod.Namespace).List(labels.Everything())
		for _, s := range svcs {
			e.queue.Add(pod.Namespace + "/" + s.Name)
		}
	}
	// A slice changed by someone else is put back.
	enqueueSlice := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelServiceName] != "" {
			e.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
		}
	}
	for inf, f := range map[cache.SharedIndexInformer]func(any){svcInf: enqueueService, podInf: enqueuePod, sliceInf: enqueueSlice} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: f, UpdateFunc: func(_, o any) { f(o) }, DeleteFunc: f,
		}); err != nil {
			return nil, nil, err
		}
	}
	return e, []cache.InformerSynced{svcInf.HasSynced, podInf.HasSynced, sliceInf.HasSynced}, nil
}

func (e *endpoints) run(ctx context.Context) {
	for {
		key, quit := e.queue.Get()
		if quit {
			return
		}
		if err := e.sync(ctx, key); err != nil && ctx.Err() == nil {
			e.node.logf("endpoints of service %s: %v (retrying)", key, err)
			e.queue.AddRateLimited(key)
		} else {
			e.queue.Forget(key)
		}
		e.queue.Done(key)
	}
}

// sync makes the node's EndpointSlices of one Service match its pods.
func (e *endpoints) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := e.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return err
	}
	var want []*discoveryv1.EndpointSlice
	svc, err := e.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		// Garbage collection removes the slices with their owner.
		return nil
	case err != nil:
		return err
	case len(svc.Spec.Selector) > 0:
		pods, err := e.pods.Pods(ns).List(labels.SelectorFromSet(svc.Spec.Selector))
		if err != nil {
			return err
		}
		want = e.desired(svc, pods)
	}
	slices := e.node.o.Client.DiscoveryV1().EndpointSlices(ns)
	have := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		have[s.Name] = s
	}
	for _, w := range want {
		cur, ok := have[w.Name]
		delete(have, w.Name)
		switch {
		case !ok:
			if _, err := slices.Create(ctx, w, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case !reflect.DeepEqual(cur.Endpoints, w.Endpoints) || !reflect.DeepEqual(cur.Ports, w.Ports) || cur.AddressType != w.AddressType:
			upd := cur.DeepCopy()
			upd.Endpoints, upd.Ports = w.Endpoints, w.Ports
			if _, err := slices.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	for _, stale := range have {
		if err := slices.Delete(ctx, stale.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// desired are the slices for svc's pods on this node: one per distinct
// port mapping (a named targetPort may resolve differently per pod), as the
// endpointslice controller groups them.
func (e *endpoints) desired(svc *corev1.Service, pods []*corev1.Pod) []*discoveryv1.EndpointSlice {
	groups := map[string]*discoveryv1.EndpointSlice{}
	for _, pod := range pods {
		ip := pod.Status.PodIP
		if pod.Spec.NodeName != e.node.o.Name || ip == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		ports := servicePorts(svc, pod)
		if len(ports) == 0 {
			continue
		}
		var sig string
		for _, p := range ports {
			sig += fmt.Sprintf("%s/%d/%s,", *p.Name, *p.Port, *p.Protocol)
		}
		g, ok := groups[sig]
		if !ok {
			g = &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeFQDN, Ports: ports}
			groups[sig] = g
		}
		terminating := pod.DeletionTimestamp != nil
		ready := podReady(pod) && !terminating
		g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(podReady(pod)), Terminating: ptr.To(terminating)},
			NodeName:   ptr.To(e.node.o.Name),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		})
	}
	sigs := make([]string, 0, len(groups))
	for s := range groups {
		sigs = append(sigs, s)
	}
	sort.Strings(sigs)
	var out []*discoveryv1.EndpointSlice
	for i, sig := range sigs {
		s := groups[sig]
		sort.Slice(s.Endpoints, func(a, b int) bool { return s.Endpoints[a].Addresses[0] < s.Endpoints[b].Addresses[0] })
		s.ObjectMeta = metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s-procnode-%d", svc.Name, i),
			Namespace: svc.Namespace,
			Labels:    map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: endpointManager},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		}
		out = append(out, s)
	}
	return out
}

// servicePorts resolves svc's ports against pod's containers: a named
// targetPort must name a container port, a number is taken as is.
func servicePorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		port := sp.TargetPort
		var num int32
		switch {
		case port.Type == intstr.String && port.StrVal != "":
			num = namedPort(pod, port.StrVal, sp.Protocol)
		case port.IntValue() > 0:
			num = int32(port.IntValue())
		default:
			num = sp.Port
		}
		if num == 0 {
			continue
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(num), Protocol: ptr.To(sp.Protocol), AppProtocol: sp.AppProtocol})
	}
	return out
}

func namedPort(pod *corev1.Pod, name string, proto corev1.Protocol) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name && (p.Protocol == proto || (p.Protocol == "" && proto == corev1.ProtocolTCP) || proto == "") {
				return p.ContainerPort
			}
		}
	}
	return 0
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// managedSlices is an informer factory for the node's own EndpointSlices.
func managedSlices(n *Node) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(n.o.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = discoveryv1.LabelManagedBy + "=" + endpointManager
	}))
}
