package procnode

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// mountError is a volume the kubelet cannot set up (a missing Secret,
// ConfigMap or key, a PVC gone since scheduling). The kubelet reports it
// only as a FailedMount Warning event on the pod, in the format of
// pkg/volume/util/operationexecutor (GenerateError):
//
//	MountVolume.SetUp failed for volume "push-auth" : secret "push" not found
//
// and leaves the containers waiting in ContainerCreating, with no message,
// until the volume can be set up.
type mountError struct {
	volume string
	cause  string
	// message, when set, replaces the SetUp failure (see claimGone).
	message string
}

func (e *mountError) Error() string {
	if e.message != "" {
		return e.message
	}
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %s", e.volume, e.cause)
}

// claimGone is a PVC deleted after the pod was scheduled. The kubelet's
// volume manager cannot process the volume, and its wait for the pod's
// mounts returns the populator's error at once (WaitForAttachAndMount in
// pkg/kubelet/volumemanager, the error from its populator); the pod's
// other volumes are mounted by then.
func claimGone(pod *corev1.Pod, volume, claim string) error {
	return &mountError{volume: volume, message: fmt.Sprintf(
		"Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[], failed to process volumes=[%s]: error processing PVC %s/%s: failed to fetch PVC from API server: persistentvolumeclaims %q not found",
		volume, volume, pod.Namespace, claim, claim)}
}

func mountErr(volume, format string, args ...any) error {
	return &mountError{volume: volume, cause: fmt.Sprintf(format, args...)}
}

// The kubelet's secret and configMap managers say "secret" and "configmap"
// (not the API's plural resource) in their not-found errors, and
// pkg/volume/secret and pkg/volume/configmap word a missing key so.
func secretNotFound(name string) string    { return fmt.Sprintf("secret %q not found", name) }
func configMapNotFound(name string) string { return fmt.Sprintf("configmap %q not found", name) }

func missingKey(kind, key string) string {
	if kind == "configmap" {
		return "configmap references non-existent config key: " + key
	}
	return "references non-existent secret key: " + key
}

// waitMount holds a pod whose volume cannot be set up, as the kubelet
// does: a FailedMount event, and a status that says ContainerCreating and
// nothing else (written once; the kubelet does not rewrite it per retry).
func (n *Node) waitMount(ctx context.Context, pod *corev1.Pod, e *mountError) error {
	n.recorder.Event(pod, corev1.EventTypeWarning, "FailedMount", e.Error())
	if creatingStatus(pod) {
		return nil
	}
	return n.writeStatus(ctx, pod, func(st *corev1.PodStatus) { pendingStatus(st, pod, n.podIP(pod.UID)) })
}

// creatingStatus: the pod's status already says it is bound and creating.
func creatingStatus(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodPending || len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w == nil || w.Reason != "ContainerCreating" || w.Message != "" {
			return false
		}
	}
	return true
}

// missingClaims says which PVCs the pod uses do not exist, as the
// scheduler's VolumeBinding plugin refuses them at PreFilter: a claim it
// names, or the claim the ephemeral volume controller makes for a generic
// ephemeral volume (not made yet).
func (n *Node) missingClaims(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	var missing []string
	for _, v := range pod.Spec.Volumes {
		claim, ephemeral := podClaim(pod, v)
		if claim == "" {
			continue
		}
		_, err := n.o.Client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && ephemeral:
			missing = append(missing, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", claim))
		case apierrors.IsNotFound(err):
			missing = append(missing, fmt.Sprintf("persistentvolumeclaim %q not found", claim))
		case err != nil:
			return nil, err
		}
	}
	return missing, nil
}

// podClaim is the PVC volume v of pod uses, if any: the one it names, or
// for a generic ephemeral volume <pod>-<volume>, the name the ephemeral
// volume controller gives the claim it creates for the pod
// (k8s.io/component-helpers/storage/ephemeral.VolumeClaimName).
func podClaim(pod *corev1.Pod, v corev1.Volume) (claim string, ephemeral bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, false
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name, true
	}
	return "", false
}

// ephemeralClaimOwned: the kubelet uses an ephemeral volume's claim only if
// the pod controls it (ephemeral.VolumeIsForPod); else its error, as the
// kubelet words it.
func ephemeralClaimOwned(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) error {
	if c := metav1.GetControllerOfNoCopy(pvc); c != nil && c.UID == pod.UID {
		return nil
	}
	return fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name)
}

// unschedulableMessage is kube-scheduler's FitError for a PreFilter
// rejection on this one-node cluster (pkg/scheduler/framework FitError).
func unschedulableMessage(reasons []string) string {
	return fmt.Sprintf("0/1 nodes are available: %s. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.", strings.Join(reasons, ", "))
}

// unschedulable records what kube-scheduler does for a pod it cannot
// place: PodScheduled False (Unschedulable) and a FailedScheduling event.
func (n *Node) unschedulable(ctx context.Context, pod *corev1.Pod, msg string) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return nil // reported already
		}
	}
	n.scheduler.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	return n.writeStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		setCondition(st, corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonUnschedulable)
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.PodScheduled {
				st.Conditions[i].Message = msg
			}
		}
	})
}

// watchClaims registers a PVC informer on factory that retries the
// scheduling of the namespace's unbound pods when a PVC appears, as
// kube-scheduler's queueing hints do: a Job's pod is often created a few
// milliseconds before its workspace PVC, and must not wait for a retry.
func (n *Node) watchClaims(factory informers.SharedInformerFactory) (cache.InformerSynced, error) {
	inf := factory.Core().V1().PersistentVolumeClaims().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		c, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok || n.pods == nil {
			return
		}
		pods, err := n.pods.Pods(c.Namespace).List(labels.Everything())
		if err != nil {
			return
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				n.queue.Add(cache.MetaObjectToName(p).String())
			}
		}
	}})
	return inf.HasSynced, err
}
