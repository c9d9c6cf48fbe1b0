package pipeline

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// ReconcileDelete is the reconcile of a deleted owner (Flux's
// reconcileDelete): no new run, only what the finalizers hold. Owner
// references let the garbage collector take the Job and PVC; only
// deletionPolicy Delete has work to do first (the cleanup Job, see
// cleanup.go), and then the children in another namespace, which no owner
// reference reaches (see RemoteFinalizer).
func (p *Pipeline) ReconcileDelete(ctx context.Context, obj Object) (ctrl.Result, error) {
	p.patched.forget(obj)
	if controllerutil.ContainsFinalizer(obj, Finalizer) {
		res, err := p.cleanup(ctx, obj)
		if err != nil || controllerutil.ContainsFinalizer(obj, Finalizer) {
			return res, err
		}
	}
	if controllerutil.ContainsFinalizer(obj, RemoteFinalizer) {
		return ctrl.Result{}, p.deleteRemoteChildren(ctx, obj)
	}
	return ctrl.Result{}, nil
}
