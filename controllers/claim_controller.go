package controllers

import (
	"context"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// Reasons a Claim cannot render yet, besides those of the rules in
// controllers/claims (shared with the admission webhook), declared there.
const (
	// ReasonTemplateNotFound: the Claim's spec.templateRef names no ClaimTemplate; the
	// Claim waits for one of that name.
	ReasonTemplateNotFound = "TemplateNotFound"
	// ReasonProfileInvalid: an EnvironmentProfile meant for the Claim's
	// namespace is not valid; the Claim waits for an admin to fix it.
	ReasonProfileInvalid = "ProfileInvalid"
	// ReasonArtifactNotReady: an Artifact the Claim binds (an Artifact
	// parameter) is missing or not Ready; the Claim waits for it.
	ReasonArtifactNotReady = "ArtifactNotReady"
)

const templateRefIndex = "spec.templateRef.name"

// ClaimReconciler resolves a Claim's template and profile, validates its
// values, and runs the shared pipeline with the render worker.
type ClaimReconciler struct {
	Client   client.Client
	Pipeline *pipeline.Pipeline
	// seals verifies the requester the admission webhook recorded.
	seals   sealCheck
	Checker *entitlement.Checker
	// WatchesFlux is set when the Flux CRDs were served at start, so the
	// Claim watches its Kustomization; otherwise delivery polls.
	WatchesFlux bool
}

// +kubebuilder:rbac:groups=packline.dev,resources=claims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=packline.dev,resources=claims/finalizers,verbs=update
// +kubebuilder:rbac:groups=packline.dev,resources=claims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=packline.dev,resources=claimtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=packline.dev,resources=environmentprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile drives one Claim through the pipeline.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &v1alpha1.Claim{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, c)
	}
	return r.Pipeline.Reconcile(ctx, c, func(ctx context.Context) (pipeline.Work, error) {
		in, err := r.load(ctx, c)
		if err != nil {
			return pipeline.Work{}, err
		}
		work, err := ClaimWork(c, in)
		if err != nil {
			return work, err
		}
		profile, _ := claims.SelectProfile(in.Profiles, in.NamespaceLabels)
		d, _ := delivery.Resolve(c, profileSpec(profile)) // ClaimWork checked it
		work.After = r.deliver(c, d, in.Template, profileSpec(profile))
		return work, r.entitle(ctx, c, in.Template, deliveryOf(c, d, profileSpec(profile)), work)
	})
}

// SetupWithManager watches Claims, their Jobs and pods, and the templates,
// profiles and namespaces a Claim's render depends on.
func (r *ClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Claim{}, templateRefIndex,
		func(o client.Object) []string { return []string{o.(*v1alpha1.Claim).Spec.TemplateRef.Name} }); err != nil {
		return err
	}
	r.Pipeline.CleanupPlacement = r.cleanupPlacement
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Claim{}, builder.WithPredicates(specOrAnnotationChanged)).
		// By label, not owner reference: a private template's Jobs are in
		// the template namespace, where no owner reference can point.
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(podOwner("Claim")), builder.WithPredicates(notCreated)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podOwner("Claim"))).
		Watches(&v1alpha1.ClaimTemplate{}, handler.EnqueueRequestsFromMapFunc(r.claimsOf(func(o client.Object) []client.ListOption {
			return []client.ListOption{client.MatchingFields{templateRefIndex: o.GetName()}}
		})), builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, readyChanged))).
		Watches(&v1alpha1.EnvironmentProfile{}, handler.EnqueueRequestsFromMapFunc(r.claimsOf(func(client.Object) []client.ListOption {
			return nil
		})), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A bound Artifact's new digest renders its Claims again; any
		// Claim of the namespace may bind it, and the hash filters the rest.
		Watches(&v1alpha1.Artifact{}, handler.EnqueueRequestsFromMapFunc(r.claimsOf(func(o client.Object) []client.ListOption {
			return []client.ListOption{client.InNamespace(o.GetNamespace())}
		})), builder.WithPredicates(artifactReferenceChanged)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.claimsOf(func(o client.Object) []client.ListOption {
			return []client.ListOption{client.InNamespace(o.GetName())}
		})), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Named("claim").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Pipeline.Config.MaxConcurrentReconciles)})
	b = watchWorkloads(mgr, b, r.Pipeline, "Claim")
	// A watch on a kind the cluster does not serve would stop the manager;
	// without Flux, delivered Claims report FluxNotInstalled and poll.
	if _, err := mgr.GetRESTMapper().RESTMapping(kustomizev1.GroupVersion.WithKind(kustomizev1.KustomizationKind).GroupKind(), kustomizev1.GroupVersion.Version); err == nil {
		r.WatchesFlux = true
		b = b.Owns(&kustomizev1.Kustomization{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
	}
	// The OCIRepository too: a verification or pull failure shows only in
	// its status, while the Kustomization may say nothing new after
	// "Source artifact not found".
	if _, err := mgr.GetRESTMapper().RESTMapping(sourcev1.GroupVersion.WithKind(sourcev1.OCIRepositoryKind).GroupKind(), sourcev1.GroupVersion.Version); err == nil {
		b = b.Owns(&sourcev1.OCIRepository{}, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
	}
	return b.Complete(r)
}

// readyChanged passes an update whose Ready condition changed status or
// reason: a template's check passing or failing decides whether its Claims
// wait (see templateNotReady).
var readyChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	ready := func(o client.Object) string {
		t, ok := o.(*v1alpha1.ClaimTemplate)
		if !ok {
			return ""
		}
		c := apimeta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}
	return ready(e.ObjectOld) != ready(e.ObjectNew)
}}

// artifactReferenceChanged passes an Artifact whose pushed reference or
// phase changed: what a Claim's Artifact binding resolves to.
var artifactReferenceChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	DeleteFunc: func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*v1alpha1.Artifact), e.ObjectNew.(*v1alpha1.Artifact)
		return o.Status.Reference != n.Status.Reference || o.Status.Phase != n.Status.Phase
	},
}

// claimsOf maps a changed dependency to the Claims that the options select.
func (r *ClaimReconciler) claimsOf(opts func(client.Object) []client.ListOption) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		var list v1alpha1.ClaimList
		if err := r.Client.List(ctx, &list, opts(o)...); err != nil {
			return nil
		}
		reqs := make([]ctrl.Request, 0, len(list.Items))
		for _, c := range list.Items {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
		return reqs
	}
}
