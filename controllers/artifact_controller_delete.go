package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/packline/packline/api/v1alpha1"
)

// reconcileDelete is a deleted Artifact's reconcile: its cleanup Job
// (deletionPolicy Delete) and its children in other namespaces.
func (r *ArtifactReconciler) reconcileDelete(ctx context.Context, a *v1alpha1.Artifact) (ctrl.Result, error) {
	return r.Pipeline.ReconcileDelete(ctx, a)
}
