package pipeline

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/packline/packline/api/v1alpha1"
)

// What the manager keeps in memory of each watched object.
//
// The informers' label selector (OwnedSelector) already leaves out the rest
// of the cluster, server-side. But labels are not proof: a tenant who can
// read one of packline's Jobs can copy its labels onto any number of its own
// Jobs, Pods or PVCs (a backup restore or a copy script does the same by
// accident), and each would be cached in full. No selector can tell a copy
// from the original, because the fields that can (owner references) are not
// selectable. So the transforms below check what the label selector cannot,
// and keep a bare stub (name, namespace, UID: no labels, no owner) of any
// object that fails, which no index, list or event handler then sees:
//
//   - a child in its owner's namespace must carry a controller owner
//     reference to a packline kind that agrees with its owner labels (kind,
//     name and UID). The garbage collector deletes an object whose owner
//     reference names no live object, so a copy can only point at a real
//     Artifact or Claim; labels alone, or a made-up owner, are not enough;
//   - a child without an owner reference (a private template's run, see
//     Work.Namespace) must be in the manager's own template namespace, which
//     tenants cannot write to;
//   - a worker pod must be controlled by the Job its job-name label names,
//     as the Job controller makes it.
//
// The residual case is a tenant that copies labels and a valid owner
// reference to its own Artifact in its own namespace, on purpose: it only
// affects its own Artifact, and its namespace's object quota bounds it. A
// signature only the manager can make would close that too, but needs a
// key shared by every replica that the manager, without access to Secrets,
// cannot keep.
//
// Every kept object is also trimmed to what the pipeline reads: the
// managedFields (about a third of a small object), the Job's pod template
// (the worker spec alone can be kilobytes), the Pod's spec, and the PVC's
// spec and status. The transforms run again on objects already trimmed
// (client-go may re-apply them), so they are idempotent.

// annotationLastApplied is kubectl apply's copy of the whole object.
const annotationLastApplied = corev1.LastAppliedConfigAnnotation

// TrimOwned strips what no reconciler reads from an Artifact or Claim (and
// any other cached object): managedFields and kubectl's last-applied copy.
func TrimOwned(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		trimMeta(m)
	}
	trimWorkload(obj)
	return obj, nil
}

// trimWorkload keeps of a Kueue Workload (cached as unstructured, every
// Workload of the cluster) only its metadata and status conditions: its
// spec holds a full copy of the pod template, and its status the
// admission's per-podset assignments, none of which the pipeline reads.
func trimWorkload(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind().GroupKind() != WorkloadGVK.GroupKind() {
		return
	}
	conds, found, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	delete(u.Object, "spec")
	delete(u.Object, "status")
	if found {
		_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
	}
}

// ChildTransforms return the cache transforms of Jobs, Pods and PVCs for a
// manager whose private runs go to templateNamespace.
func ChildTransforms(templateNamespace string) (job, pod, pvc toolscache.TransformFunc) {
	job = func(obj any) (any, error) {
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return obj, nil
		}
		if !ownedChild(j, templateNamespace) {
			return stub(j), nil
		}
		trimMeta(j)
		// observe reads suspend, managedBy (a dispatched Job) and the
		// status; the pod template, selector and the rest are the
		// manager's own input, never read back.
		j.Spec = batchv1.JobSpec{Suspend: j.Spec.Suspend, ManagedBy: j.Spec.ManagedBy}
		return j, nil
	}
	pod = func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		if !jobPod(p) {
			return stub(p), nil
		}
		trimMeta(p)
		p.Spec = corev1.PodSpec{}
		// Reason and Message are the kubelet's word on an evicted pod
		// ("Evicted", which emptyDir went over its sizeLimit): observe
		// reports them.
		p.Status = corev1.PodStatus{Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message,
			Conditions: p.Status.Conditions, ContainerStatuses: trimContainerStatuses(p.Status.ContainerStatuses)}
		return p, nil
	}
	pvc = func(obj any) (any, error) {
		c, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return obj, nil
		}
		if !ownedChild(c, templateNamespace) {
			return stub(c), nil
		}
		trimMeta(c)
		// Only the workspace's existence, labels and deletion are read.
		c.Spec, c.Status = corev1.PersistentVolumeClaimSpec{}, corev1.PersistentVolumeClaimStatus{}
		return c, nil
	}
	return job, pod, pvc
}

func trimMeta(m metav1.Object) {
	if m.GetManagedFields() != nil {
		// Only when set: an unstructured object would gain a null field
		// (kubernetes/kubernetes#124337).
		m.SetManagedFields(nil)
	}
	if a := m.GetAnnotations(); a[annotationLastApplied] != "" {
		delete(a, annotationLastApplied)
		m.SetAnnotations(a)
	}
}

// ownedChild reports whether a Job or PVC is one the pipeline made, as far
// as its content can tell (see the comment at the top of this file).
func ownedChild(o metav1.Object, templateNamespace string) bool {
	l := o.GetLabels()
	if l[LabelManagedBy] != managedBy || l[LabelOwnerUID] == "" || l[LabelOwnerName] == "" {
		return false
	}
	if l[LabelOwnerNamespace] != "" {
		return o.GetNamespace() == templateNamespace && templateNamespace != "" && len(o.GetOwnerReferences()) == 0
	}
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.APIVersion == v1alpha1.GroupVersion.String() && ref.Kind == l[LabelOwnerKind] &&
		ref.Name == l[LabelOwnerName] && string(ref.UID) == l[LabelOwnerUID]
}

// jobPod reports whether a pod is the Job controller's, for the Job its
// labels name.
func jobPod(p *corev1.Pod) bool {
	job := p.Labels[batchv1.JobNameLabel]
	ref := metav1.GetControllerOfNoCopy(p)
	return job != "" && p.Labels[LabelOwnerUID] != "" && ref != nil &&
		ref.APIVersion == batchv1.SchemeGroupVersion.String() && ref.Kind == "Job" && ref.Name == job &&
		string(ref.UID) == p.Labels[batchv1.ControllerUidLabel]
}

// trimContainerStatuses keeps what observe reads: the name and state.
func trimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		// Resources (the kubelet's record of the applied limits) name the
		// memory limit of an OOM-killed worker; the spec is not cached.
		out[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State, Resources: cs.Resources}
	}
	return out
}

// stub is what the cache keeps of an object that only looks like one of
// packline's: enough for the informer to track it, nothing any reader uses.
func stub[T any, PT interface {
	*T
	metav1.Object
}](o PT) PT {
	s := PT(new(T))
	s.SetName(o.GetName())
	s.SetNamespace(o.GetNamespace())
	s.SetUID(o.GetUID())
	s.SetResourceVersion(o.GetResourceVersion())
	return s
}
