package pipeline

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// RemoteFinalizer holds an owner whose Jobs or workspace live in another
// namespace (Work.Namespace): an owner reference cannot cross namespaces,
// so the garbage collector would never delete them. On deletion the
// pipeline deletes them itself, then lets the owner go.
//
// It is added before the first such child is created and kept until the
// owner is deleted, even if later runs are back in the owner's namespace:
// proving that no child is left elsewhere would cost a cluster-wide list on
// every reconcile, and keeping it costs one list at deletion.
const RemoteFinalizer = "packline.dev/remote-children"

// ReasonNamespaceMissing: the namespace a run must go to does not exist.
const ReasonNamespaceMissing = "NamespaceMissing"

// syncRemoteFinalizer adds RemoteFinalizer before a run creates anything in
// another namespace.
func (p *Pipeline) syncRemoteFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.blocked != nil || !s.remote() || controllerutil.ContainsFinalizer(s.obj, RemoteFinalizer) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, p.patchFinalizers(ctx, s.obj, func() { controllerutil.AddFinalizer(s.obj, RemoteFinalizer) })
}

// deleteRemoteChildren deletes the owner's Jobs and workspace PVCs in other
// namespaces and removes RemoteFinalizer. It reads past the cache, so a Job
// created just before the owner was deleted is found too. The Jobs' pods
// follow their Job (same namespace, so the garbage collector takes them),
// and a PVC still mounted by a terminating pod goes once the pod is gone
// (kubernetes.io/pvc-protection): issuing the deletes is enough.
func (p *Pipeline) deleteRemoteChildren(ctx context.Context, obj Object) error {
	ns, uid := obj.GetNamespace(), string(obj.GetUID())
	remote := func(o metav1.Object) bool {
		return o.GetNamespace() != ns && o.GetLabels()[LabelOwnerNamespace] == ns && o.GetDeletionTimestamp().IsZero()
	}
	sel := client.MatchingLabels{LabelOwnerUID: uid}
	var jobs batchv1.JobList
	if err := p.APIReader.List(ctx, &jobs, sel); err != nil {
		return fmt.Errorf("listing Jobs: %w", err)
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !remote(j) {
			continue
		}
		// Only the Job listed, not one made under its name since.
		if err := p.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting Job %s/%s: %w", j.Namespace, j.Name, err)
		}
		logf.FromContext(ctx).Info("deleted Job of a deleted owner", "namespace", j.Namespace, "job", j.Name)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := p.APIReader.List(ctx, &pvcs, sel); err != nil {
		return fmt.Errorf("listing workspaces: %w", err)
	}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if !remote(pvc) {
			continue
		}
		if err := p.deleteWorkspace(ctx, pvc); err != nil {
			return fmt.Errorf("deleting workspace %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
		logf.FromContext(ctx).Info("deleted workspace of a deleted owner", "namespace", pvc.Namespace, "pvc", pvc.Name)
	}
	return client.IgnoreNotFound(p.patchFinalizers(ctx, obj, func() { controllerutil.RemoveFinalizer(obj, RemoteFinalizer) }))
}
