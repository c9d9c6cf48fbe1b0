// Package controllers holds one reconciler per kind; the shared run engine
// is in controllers/pipeline.
package controllers

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// ArtifactReconciler runs the pipeline for Artifacts.
type ArtifactReconciler struct {
	Client   client.Client
	Pipeline *pipeline.Pipeline
	// seals verifies the requester the admission webhook recorded, and
	// Checker its rights to what the Artifact names.
	seals   sealCheck
	Checker *entitlement.Checker
}

// +kubebuilder:rbac:groups=packline.dev,resources=artifacts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=packline.dev,resources=artifacts/finalizers,verbs=update
// +kubebuilder:rbac:groups=packline.dev,resources=artifacts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile drives one Artifact through the pipeline.
func (r *ArtifactReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &v1alpha1.Artifact{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !a.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, a)
	}
	return r.Pipeline.Reconcile(ctx, a, func(ctx context.Context) (pipeline.Work, error) {
		work, err := ArtifactWork(a)
		if err != nil {
			return work, err
		}
		doc := work.Spec.(workerv1.Artifact)
		// The last push, as loaded (before a new run clears status): the
		// worker re-uses its layers whatever the tag now says. Only a push
		// the manager sealed: the worker trusts that manifest's layer keys.
		if ref := r.Pipeline.SealedReference(a); ref != "" {
			doc.Previous = append(doc.Previous, ref)
		}
		mirrors, err := r.mirrorsOf(ctx, a)
		if err != nil {
			return work, err
		}
		doc.Previous = append(doc.Previous, mirrors...)
		work.Spec = doc
		return work, r.entitle(ctx, a, work)
	})
}

// SetupWithManager watches Artifacts, their Jobs, and the Jobs' pods (pod
// status carries the result and the reasons a pod is stuck).
func (r *ArtifactReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Artifact{}, mirrorIndex, indexPushedSource); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Artifact{}, builder.WithPredicates(specOrAnnotationChanged)).
		Owns(&batchv1.Job{}, builder.WithPredicates(notCreated)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podOwner("Artifact")))
	return watchWorkloads(mgr, b, r.Pipeline, "Artifact").
		Named("artifact").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Pipeline.Config.MaxConcurrentReconciles)}).
		Complete(r)
}

// podOwner maps a worker pod (or Job) to its owner through the pipeline's
// labels: in the owner's namespace, or the one the owner-namespace label
// names for a child in another namespace (see pipeline.Work.Namespace).
// Labels are anyone's to write, so this only wakes a reconcile: what it
// reads is the owner's Jobs by controller reference, and their pods by the
// Job's UID (pipeline.JobPods), never this object.
func podOwner(kind string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []ctrl.Request {
		l := o.GetLabels()
		if l[pipeline.LabelOwnerKind] != kind || l[pipeline.LabelOwnerName] == "" {
			return nil
		}
		ns := o.GetNamespace()
		if owner := l[pipeline.LabelOwnerNamespace]; owner != "" {
			ns = owner
		}
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: l[pipeline.LabelOwnerName]}}}
	}
}

// notCreated ignores a Job's create event: the reconcile that created the
// Job has already observed it, and at start-up every owner is reconciled
// anyway. Woken by its own create, a reconcile ran on a cache that usually
// did not yet hold the status it had just patched, and redid that work.
var notCreated = predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}

// specOrAnnotationChanged wakes a reconcile on a spec change or an
// annotation change (packline.dev/requestedAt), not on status updates.
var specOrAnnotationChanged = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
