package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Valid",
		Message: "profile is valid", ObservedGeneration: p.Generation}
	if err := claims.ValidateProfile(p); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonProfileInvalid, err.Error()
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, cond)
	p.Status.ObservedGeneration = p.Generation
	if equality.Semantic.DeepEqual(base.Status, p.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Client.Status().Patch(ctx, p, client.MergeFrom(base))
}

// SetupWithManager watches EnvironmentProfiles.
func (r *EnvironmentProfileReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EnvironmentProfile{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("environmentprofile").
		Complete(r)
}
