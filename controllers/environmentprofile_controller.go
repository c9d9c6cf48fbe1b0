package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/claims"
)

// EnvironmentProfileReconciler tells admins whether a profile is usable, as
// ClaimTemplates do: a broken one is skipped when Claims pick their
// profile, and its own status says why.
type EnvironmentProfileReconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=packline.dev,resources=environmentprofiles/status,verbs=get;update;patch

// Reconcile validates one EnvironmentProfile.
func (r *EnvironmentProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.EnvironmentProfile{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := p.DeepCopy()
	return ctrl.Result{}, reportValidity(ctx, r.Client, p, base,
		validity{&p.Status.Conditions, &p.Status.ObservedGeneration}, "profile", ReasonProfileInvalid, claims.ValidateProfile(p))
}

// SetupWithManager watches EnvironmentProfiles.
func (r *EnvironmentProfileReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EnvironmentProfile{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("environmentprofile").
		Complete(r)
}
