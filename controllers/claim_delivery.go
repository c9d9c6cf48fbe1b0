package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=ocirepositories,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get;list;watch;create;update;patch;delete

// deliveryPoll re-reads Flux's status when no watch on its objects runs
// (the Flux CRDs were absent when the manager started).
const deliveryPoll = 15 * time.Second

// deliveryStall is a delivery that cannot go on until someone acts: it is
// reported as Delivered=False and Stalled, and looked at again at the
// backoff cap, never in a hot loop.
type deliveryStall struct{ reason, message string }

func (e *deliveryStall) Error() string { return e.reason + ": " + e.message }

// deliver is a delivered Claim's After step: once its render succeeded, it
// keeps the Flux objects pinned to the digest and mirrors what Flux applied
// into Delivered, Drifted and Ready. The Claim is Ready only when the digest
// is pushed and applied: every path below sets Delivered.
func (r *ClaimReconciler) deliver(c *v1alpha1.Claim, d *v1alpha1.FluxDelivery, tpl *v1alpha1.ClaimTemplate, profile *v1alpha1.EnvironmentProfileSpec) func(context.Context) (ctrl.Result, error) {
	return func(ctx context.Context) (ctrl.Result, error) {
		st := &c.Status.PipelineStatus
		if d == nil {
			return ctrl.Result{}, r.undeliver(ctx, c)
		}
		if st.Digest == "" {
			return ctrl.Result{}, nil
		}
		plan := delivery.NewPlan(c, d, tpl.Spec.Private())
		if c.Status.Delivery == nil {
			c.Status.Delivery = &v1alpha1.DeliveryStatus{}
		}
		c.Status.Delivery.OCIRepository, c.Status.Delivery.Kustomization = plan.Name, plan.Name
		var repo *sourcev1.OCIRepository
		var ks *kustomizev1.Kustomization
		var err error
		// A new render in progress keeps Flux on the last digest it applied.
		if st.Phase == v1alpha1.PhaseSucceeded {
			if err = r.entitleDelivery(ctx, c, tpl, profile); err == nil {
				err = r.digestRecorded(ctx, c, plan)
			}
			if err == nil {
				repo, ks, err = r.applyFlux(ctx, c, plan)
			}
		} else {
			repo, ks, err = r.readFlux(ctx, c, plan)
		}
		if err != nil {
			return r.deliveryFailed(st, plan, err)
		}
		o := delivery.Observe(plan, repo, ks)
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
		pipeline.MarkDeliverStep(st, !o.Done, time.Now())
		ready := deliveredReadiness(st, o)
		pipeline.MarkReadiness(st, ready)
		if !ready.Ready && !r.WatchesFlux {
			return ctrl.Result{RequeueAfter: deliveryPoll}, nil
		}
		return ctrl.Result{}, nil
	}
}

// digestRecorded refuses to point Flux at a digest the manager did not
// record itself. status.digest and status.reference are writable by anyone
// with the claims/status subresource, and Flux applies what they name as
// the delivery identity, which may hold more rights than the tenant: so a
// new digest is delivered only when status.pushSeal, which the manager
// writes when it reads the push from its own worker's pod, verifies. A
// digest the Flux objects already pin needs no seal: nothing changes (this
// keeps delivered Claims delivered after a restart of a manager without a
// stable seal key, --enable-webhooks=false).
func (r *ClaimReconciler) digestRecorded(ctx context.Context, c *v1alpha1.Claim, p delivery.Plan) error {
	if r.Pipeline.PushSealer == nil || r.Pipeline.SealedReference(c) != "" {
		return nil
	}
	repo, _, err := r.readFlux(ctx, c, p)
	if err != nil {
		return err
	}
	if repo != nil && repo.Spec.Reference != nil && repo.Spec.Reference.Digest == p.Digest && repo.Spec.URL == "oci://"+p.Repository {
		return nil
	}
	return &deliveryStall{reason: delivery.ReasonDigestUnrecorded, message: "status.digest " + p.Digest +
		" was not recorded by this manager (status.pushSeal does not verify), so Flux is not pointed at it: packline delivers only what it read from its own worker's pod; change the Claim's spec, or delete and re-create it, to render and push again"}
}

// deliveryFailed reports an error of the delivery step on the Claim, so
// that it is never Ready=True without a Delivered condition. A cause that
// needs someone to act stalls and is looked at again at the backoff cap;
// anything else is retried with the controller's backoff.
func (r *ClaimReconciler) deliveryFailed(st *v1alpha1.PipelineStatus, p delivery.Plan, err error) (ctrl.Result, error) {
	reason, msg, stall := deliveryFailure(p, err)
	pipeline.MarkDeliverStep(st, st.Phase == v1alpha1.PhaseSucceeded, time.Now())
	delivered := metav1.ConditionUnknown
	if stall {
		delivered = metav1.ConditionFalse
	}
	pipeline.MarkCondition(st, v1alpha1.ConditionDelivered, delivered, reason, msg)
	pipeline.MarkReadiness(st, pipeline.Readiness{Stalled: stall, Reason: reason, Message: msg})
	if !stall {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.Pipeline.Config.BackoffCap}, nil
}

// deliveredReadiness is a succeeded render's Ready from what Flux did with
// it: Ready once Flux applied the digest, else in progress.
func deliveredReadiness(st *v1alpha1.PipelineStatus, o delivery.Observed) pipeline.Readiness {
	switch {
	case o.Done:
		return pipeline.Readiness{Ready: true, Reason: "Delivered", Message: "pushed " + st.Reference + " and Flux applied " + o.Applied}
	case o.Delivered.Status == metav1.ConditionFalse:
		return pipeline.Readiness{Reason: o.Delivered.Reason, Message: "Flux has not applied " + st.Digest + ": " + o.Delivered.Message}
	}
	return pipeline.Readiness{Reason: delivery.ReasonDelivering, Message: o.Delivered.Message}
}

// deliveryFailure is the reason and message of an error of the delivery
// step, and whether it stalls (see delivery.Failure).
func deliveryFailure(p delivery.Plan, err error) (reason, msg string, stall bool) {
	var ds *deliveryStall
	if errors.As(err, &ds) {
		return ds.reason, ds.message, true
	}
	if reason, msg, stall = delivery.Failure(err); stall {
		return reason, msg, true
	}
	return pipeline.ReasonReconcileError, "delivering " + p.Digest + ": " + err.Error(), false
}

// entitleDelivery checks, before each apply, that the Claim's requester
// may still deliver it: impersonate the ServiceAccount the Claim names,
// and create, patch and delete what the template renders. The admission
// webhook checked this at apply time; rights change since. If the check
// cannot run, nothing is applied.
func (r *ClaimReconciler) entitleDelivery(ctx context.Context, c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, profile *v1alpha1.EnvironmentProfileSpec) error {
	d := entitlement.Delivery{ServiceAccount: delivery.ClaimServiceAccount(c, profile)}
	restricted := tpl.Spec.Access.ClaimVerbRequired() || len(tpl.Spec.Access.Groups) > 0
	unverified := func(why string) error {
		return &deliveryStall{reason: ReasonEntitlementUnverified, message: "spec.delivery.flux.serviceAccountName: Flux would apply as ServiceAccount " + d.ServiceAccount +
			", which needs the requester's impersonate right, but " + why}
	}
	if r.seals.Sealer == nil {
		if d.ServiceAccount != "" {
			return unverified("the manager runs without its admission webhook (--enable-webhooks=false), so who asked for this Claim cannot be verified: enable the webhook and re-apply the Claim, or let the EnvironmentProfile name the ServiceAccount")
		}
		return nil
	}
	req, err := r.seals.Sealer.Verify("Claim", c, c.Spec)
	switch {
	case errors.Is(err, entitlement.ErrNoKey), errors.Is(err, entitlement.ErrUntrusted):
		// No key yet, or the webhook configurations are not verified yet
		// (ConfigGuard): an error, so the step is retried with backoff
		// rather than stalled.
		return err
	case err != nil && d.ServiceAccount != "":
		return unverified(err.Error() + ": re-apply the Claim so the admission webhook records who asks")
	case err != nil && !restricted:
		// An open template rendered without a requester (see entitle).
		return nil
	case err != nil:
		return &deliveryStall{reason: ReasonEntitlementUnverified, message: err.Error()}
	}
	rights, err := r.Checker.DeliveryRights(c, tpl, d)
	if err != nil {
		return &deliveryStall{reason: ReasonEntitlementDenied, message: err.Error()}
	}
	err = r.Checker.Check(ctx, req, rights)
	var denied *entitlement.Denied
	switch {
	case errors.As(err, &denied):
		return &deliveryStall{reason: ReasonEntitlementDenied, message: fmt.Sprintf("%v (checked again every %s)", err, r.Pipeline.Config.BackoffCap)}
	case err != nil:
		// Fail closed, and retry: not an error of the Flux objects (%v keeps
		// delivery.Failure from reading it as one).
		return fmt.Errorf("checking the requester's rights before applying the Flux objects: %v", err)
	}
	return nil
}
