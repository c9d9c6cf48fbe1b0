package controllers

import (
	"context"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/pipeline"
)

// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=ocirepositories,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch;create;update;patch;delete

// deliveryPoll re-reads Flux's status when no watch on its objects runs
// (the Flux CRDs were absent when the manager started).
const deliveryPoll = 15 * time.Second

// deliver is a delivered Claim's After step: once its render succeeded, it
// keeps the Flux objects pinned to the digest and mirrors what Flux applied
// into Delivered, Drifted and Ready. The Claim is Ready only when the digest
// is pushed and applied.
func (r *ClaimReconciler) deliver(c *v1alpha1.Claim, d *v1alpha1.FluxDelivery, private bool) func(context.Context) (ctrl.Result, error) {
	return func(ctx context.Context) (ctrl.Result, error) {
		st := &c.Status.PipelineStatus
		if d == nil {
			return ctrl.Result{}, r.undeliver(ctx, c)
		}
		if st.Digest == "" {
			return ctrl.Result{}, nil
		}
		plan := delivery.NewPlan(c, d, private)
		if c.Status.Delivery == nil {
			c.Status.Delivery = &v1alpha1.DeliveryStatus{}
		}
		c.Status.Delivery.OCIRepository, c.Status.Delivery.Kustomization = plan.Name, plan.Name
		// A new render in progress keeps Flux on the last digest it applied.
		if st.Phase == v1alpha1.PhaseSucceeded {
			if err := r.applyFlux(ctx, c, plan); err != nil {
				if apimeta.IsNoMatchError(err) {
					msg := "Flux is not installed: this cluster does not serve " + delivery.FluxCRDs + "; install Flux or turn spec.delivery off"
					pipeline.MarkCondition(st, v1alpha1.ConditionDelivered, metav1.ConditionFalse, delivery.ReasonFluxNotInstalled, msg)
					pipeline.MarkStalled(st, delivery.ReasonFluxNotInstalled, msg)
					return ctrl.Result{RequeueAfter: r.Pipeline.Config.BackoffCap}, nil
				}
				return ctrl.Result{}, err
			}
		}
		k := &kustomizev1.Kustomization{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: plan.Namespace, Name: plan.Name}, k); err != nil {
			if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			k = nil
		}
		o := delivery.Observe(k, st.Digest)
		c.Status.Delivery.LastAppliedRevision = o.Applied
		pipeline.MarkCondition(st, v1alpha1.ConditionDelivered, o.Delivered.Status, o.Delivered.Reason, o.Delivered.Message)
		if o.Drifted {
			pipeline.MarkCondition(st, v1alpha1.ConditionDrifted, metav1.ConditionTrue, delivery.ReasonRevisionMismatch,
				fmt.Sprintf("Flux applied %s, not the Claim's digest %s", o.Applied, st.Digest))
		} else {
			apimeta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionDrifted)
		}
		if st.Phase != v1alpha1.PhaseSucceeded {
			return ctrl.Result{}, nil
		}
		switch {
		case o.Done:
			pipeline.MarkReady(st, "Delivered", "pushed "+st.Reference+" and Flux applied "+o.Applied)
			return ctrl.Result{}, nil
		case o.Delivered.Status == metav1.ConditionFalse:
			pipeline.MarkProgress(st, o.Delivered.Reason, "Flux has not applied "+st.Digest+": "+o.Delivered.Message)
		default:
			pipeline.MarkProgress(st, delivery.ReasonDelivering, o.Delivered.Message)
		}
		if !r.WatchesFlux {
			return ctrl.Result{RequeueAfter: deliveryPoll}, nil
		}
		return ctrl.Result{}, nil
	}
}

// applyFlux creates or updates the Claim's OCIRepository and Kustomization,
// owned by the Claim: deleting the Claim deletes the Kustomization, and
// Flux's own finalizer then prunes what it applied.
func (r *ClaimReconciler) applyFlux(ctx context.Context, c *v1alpha1.Claim, p delivery.Plan) error {
	repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, repo, func() error {
		delivery.SetOCIRepositorySpec(repo, p)
		return controllerutil.SetControllerReference(c, repo, r.Client.Scheme())
	}); err != nil {
		return fmt.Errorf("OCIRepository %s: %w", p.Name, err)
	}
	k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	if _, err := controllerutil.CreateOrPatch(ctx, r.Client, k, func() error {
		delivery.SetKustomizationSpec(k, p)
		return controllerutil.SetControllerReference(c, k, r.Client.Scheme())
	}); err != nil {
		return fmt.Errorf("Kustomization %s: %w", p.Name, err)
	}
	return nil
}

// undeliver removes the Flux objects of a Claim whose delivery was turned
// off. Deleting the Kustomization prunes what it applied (with prune on):
// turning delivery off undeploys the workload.
func (r *ClaimReconciler) undeliver(ctx context.Context, c *v1alpha1.Claim) error {
	if c.Status.Delivery == nil {
		return nil
	}
	for _, o := range []client.Object{
		&kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Name: c.Status.Delivery.Kustomization, Namespace: c.Namespace}},
		&sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: c.Status.Delivery.OCIRepository, Namespace: c.Namespace}},
	} {
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
			return err
		}
	}
	c.Status.Delivery = nil
	apimeta.RemoveStatusCondition(&c.Status.Conditions, v1alpha1.ConditionDelivered)
	apimeta.RemoveStatusCondition(&c.Status.Conditions, v1alpha1.ConditionDrifted)
	return nil
}
