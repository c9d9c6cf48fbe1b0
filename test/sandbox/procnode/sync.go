package procnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// configRetry is how soon a pod whose Secret or ConfigMap is missing is
// tried again; the kubelet too keeps retrying until the object appears.
const configRetry = 2 * time.Second

// sync moves one pod a step towards its desired state.
func (n *Node) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := n.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		n.killKey(ns, name)
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case pod.Spec.NodeName == "":
		return n.bind(ctx, pod)
	case pod.Spec.NodeName != n.o.Name:
		return nil
	case pod.DeletionTimestamp != nil:
		return n.terminate(ctx, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil
	}
	if n.run(pod.UID) != nil {
		return nil
	}
	return n.start(ctx, pod)
}

// bind plays the scheduler: this is the cluster's only node, so every
// pending pod whose PVCs exist fits. Like a real cluster, a pod whose image cannot be pulled
// is still scheduled, and the node then reports ImagePullBackOff.
func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil || (pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName) {
		return nil
	}
	// Like kube-scheduler's VolumeBinding plugin, a pod whose PVC does not
	// exist is not bound, and is tried again.
	if claims, err := n.missingClaims(ctx, pod); err != nil {
		return err
	} else if len(claims) > 0 {
		n.queue.AddAfter(cache.MetaObjectToName(pod).String(), configRetry)
		return n.unschedulable(ctx, pod, unschedulableMessage(claims))
	}
	err := n.o.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.o.Name},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or bound meanwhile
	}
	if err == nil {
		n.recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, n.o.Name)
	}
	return err
}

// start prepares the pod's volumes and env and starts its containers; a pod
// it cannot start yet gets a waiting status and is tried again.
func (n *Node) start(ctx context.Context, pod *corev1.Pod) error {
	for _, c := range pod.Spec.Containers {
		if _, ok := n.o.Images[c.Image]; !ok {
			return n.imagePullBackOff(ctx, pod, c)
		}
	}
	if len(pod.Spec.InitContainers) > 0 {
		return n.waiting(ctx, pod, "CreateContainerConfigError", "init containers are not supported by the process node")
	}
	specs, err := n.prepare(ctx, pod)
	var cfgErr *configError
	var mntErr *mountError
	if errors.As(err, &mntErr) {
		n.logf("pod %s/%s waits: FailedMount: %v", pod.Namespace, pod.Name, mntErr)
		n.queue.AddAfter(cache.MetaObjectToName(pod).String(), configRetry)
		return n.waitMount(ctx, pod, mntErr)
	}
	if errors.As(err, &cfgErr) {
		n.logf("pod %s/%s waits: %s: %v", pod.Namespace, pod.Name, cfgErr.reason, cfgErr)
		n.queue.AddAfter(cache.MetaObjectToName(pod).String(), configRetry)
		n.recorder.Event(pod, corev1.EventTypeWarning, "Failed", "Error: "+cfgErr.Error())
		return n.waiting(ctx, pod, cfgErr.reason, cfgErr.Error())
	}
	if err != nil {
		return err
	}
	r := n.launch(pod, specs, n.podIP(pod.UID))
	n.refreshPod(r)
	n.logf("pod %s/%s started (%d containers)", pod.Namespace, pod.Name, len(specs))
	if err := n.writeStatus(ctx, pod, func(st *corev1.PodStatus) { runningStatus(st, pod, r) }); err != nil {
		return err
	}
	for _, s := range specs {
		n.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "Started container %s", s.name)
	}
	return nil
}

// terminate kills a deleted pod's processes, records how they ended and
// removes the pod for good, which is the kubelet's half of graceful deletion.
func (n *Node) terminate(ctx context.Context, pod *corev1.Pod) error {
	if r := n.run(pod.UID); r != nil {
		grace := 30 * time.Second
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		}
		r.kill(grace)
		<-r.done
	}
	err := n.o.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil
	}
	if err == nil {
		n.forget(pod.UID)
	}
	return err
}

// finished is called once every container of r has exited.
func (n *Node) finished(pod *corev1.Pod, r *podRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := n.writeStatus(ctx, pod, func(st *corev1.PodStatus) { terminatedStatus(st, pod, r) })
	if err != nil && !apierrors.IsNotFound(err) {
		n.logf("pod %s/%s: writing final status: %v", pod.Namespace, pod.Name, err)
	}
	n.logf("pod %s/%s finished: %s", pod.Namespace, pod.Name, r.summary())
	n.queue.Add(cache.MetaObjectToName(pod).String())
}

func (n *Node) imagePullBackOff(ctx context.Context, pod *corev1.Pod, c corev1.Container) error {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == c.Name && s.State.Waiting != nil && s.State.Waiting.Reason == "ImagePullBackOff" {
			return nil // reported already
		}
	}
	msg := fmt.Sprintf("Back-off pulling image %q: the process node has no binary for this image", c.Image)
	n.recorder.Event(pod, corev1.EventTypeWarning, "Failed", msg)
	return n.waitingContainer(ctx, pod, c.Name, "ImagePullBackOff", msg)
}

func (n *Node) waiting(ctx context.Context, pod *corev1.Pod, reason, msg string) error {
	return n.waitingContainer(ctx, pod, "", reason, msg)
}

// waitingContainer marks one container (or, with name "", every container)
// as waiting; the pod stays Pending.
func (n *Node) waitingContainer(ctx context.Context, pod *corev1.Pod, name, reason, msg string) error {
	return n.writeStatus(ctx, pod, func(st *corev1.PodStatus) {
		pendingStatus(st, pod, n.podIP(pod.UID))
		for i := range st.ContainerStatuses {
			cs := &st.ContainerStatuses[i]
			if name == "" || cs.Name == name {
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
			}
		}
	})
}

// writeStatus applies mutate to the latest pod and writes its status.
func (n *Node) writeStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.PodStatus)) error {
	pods := n.o.Client.CoreV1().Pods(pod.Namespace)
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return nil // a new pod with the same name
		}
		mutate(&cur.Status)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (n *Node) run(uid types.UID) *podRun {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runs[uid]
}

func (n *Node) forget(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.runs, uid)
	n.releasePodIP(uid)
}

// killKey handles a pod that vanished without the node seeing its deletion
// (e.g. force-deleted): its processes must not outlive it.
func (n *Node) killKey(ns, name string) {
	n.mu.Lock()
	var victims []*podRun
	for uid, r := range n.runs {
		if r.pod.Namespace == ns && r.pod.Name == name {
			victims = append(victims, r)
			delete(n.runs, uid)
		}
	}
	n.mu.Unlock()
	for _, r := range victims {
		r.kill(0)
	}
}

func (n *Node) killAll() {
	n.mu.Lock()
	runs := n.runs
	n.runs = map[types.UID]*podRun{}
	n.mu.Unlock()
	for _, r := range runs {
		r.kill(0)
	}
	n.wg.Wait()
}
