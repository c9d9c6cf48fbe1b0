package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/packline/packline/api/v1alpha1"
)

// reconcileDelete is a deleted Claim's reconcile: its cleanup Job
// (deletionPolicy Delete) and its children in the template namespace. Its
// Flux objects carry its owner reference: the garbage collector deletes
// them, and Flux's own finalizer then prunes what it applied.
func (r *ClaimReconciler) reconcileDelete(ctx context.Context, c *v1alpha1.Claim) (ctrl.Result, error) {
	return r.Pipeline.ReconcileDelete(ctx, c)
}
