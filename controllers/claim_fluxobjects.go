package controllers

import (
	"context"
	"fmt"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/delivery"
)

// DeliveryFieldManager owns the fields packline writes on its Flux objects.
const DeliveryFieldManager = "packline-delivery"

// legacyFieldManagers wrote the Flux objects before packline applied them
// server-side (CreateOrPatch, under the binary's name); their fields are
// handed to DeliveryFieldManager so that a field the plan drops is removed.
var legacyFieldManagers = sets.New(DeliveryFieldManager, "manager")

// applyFlux creates the Claim's OCIRepository and Kustomization, or brings
// the Claim's own ones to the plan. It never adopts: an object of the name
// that the Claim does not control is a DeliveryConflict, left untouched.
// Deleting the Claim deletes the Kustomization (owner reference), and
// Flux's own finalizer then prunes what it applied.
func (r *ClaimReconciler) applyFlux(ctx context.Context, c *v1alpha1.Claim, p delivery.Plan) (*sourcev1.OCIRepository, *kustomizev1.Kustomization, error) {
	repo, ks := &sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}
	if err := r.ensureFlux(ctx, c, delivery.OCIRepository(p), repo); err != nil {
		return nil, nil, err
	}
	if err := r.ensureFlux(ctx, c, delivery.Kustomization(p), ks); err != nil {
		return nil, nil, err
	}
	return repo, ks, nil
}

// readFlux reads the Claim's Flux objects without changing them; one the
// Claim does not control, or a kind not served, is as good as absent (the
// next apply says why).
func (r *ClaimReconciler) readFlux(ctx context.Context, c *v1alpha1.Claim, p delivery.Plan) (*sourcev1.OCIRepository, *kustomizev1.Kustomization, error) {
	repo, ks := &sourcev1.OCIRepository{}, &kustomizev1.Kustomization{}
	key := client.ObjectKey{Namespace: p.Namespace, Name: p.Name}
	var out [2]client.Object
	for i, o := range []client.Object{repo, ks} {
		switch err := r.Pipeline.APIReader.Get(ctx, key, o); {
		case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
		case err != nil:
			return nil, nil, err
		case metav1.IsControlledBy(o, c):
			out[i] = o
		}
	}
	repo, _ = out[0].(*sourcev1.OCIRepository)
	ks, _ = out[1].(*kustomizev1.Kustomization)
	return repo, ks, nil
}

// ensureFlux makes live the Claim's object want (a full spec, typed, with
// its TypeMeta). Absent, it is created, controlled by the Claim. Present,
// it is applied server-side only if the Claim controls it, with the
// resourceVersion read as a precondition: an object deleted and re-created
// by someone else in between is never written.
func (r *ClaimReconciler) ensureFlux(ctx context.Context, c *v1alpha1.Claim, want, live client.Object) error {
	kind := want.GetObjectKind().GroupVersionKind().Kind
	key := client.ObjectKeyFromObject(want)
	if err := controllerutil.SetControllerReference(c, want, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Pipeline.APIReader.Get(ctx, key, live)
	if apierrors.IsNotFound(err) {
		created := want.DeepCopyObject().(client.Object)
		err = r.Client.Create(ctx, created, client.FieldOwner(DeliveryFieldManager))
		if err == nil {
			return r.ownFields(ctx, created, live)
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", kind, key.Name, err)
		}
		err = r.Pipeline.APIReader.Get(ctx, key, live)
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, key.Name, err)
	}
	if !metav1.IsControlledBy(live, c) {
		return &deliveryStall{reason: delivery.ReasonDeliveryConflict, message: fmt.Sprintf(
			"%s %s/%s already exists and is not controlled by this Claim (%s): packline creates its Flux objects and never adopts one; delete or rename that object, or rename the Claim",
			kind, key.Namespace, key.Name, controllerOf(live))}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	u.SetResourceVersion(live.GetResourceVersion())
	if err := r.Client.Patch(ctx, u, client.Apply, client.FieldOwner(DeliveryFieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", kind, key.Name, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live); err != nil {
		return err
	}
	return r.ownFields(ctx, live, live)
}

// ownFields hands the fields written by a create (an Update operation) to
// DeliveryFieldManager's apply, so that the next apply removes a field the
// plan no longer sets (a dropped verify or secretRef). The patch carries
// the resourceVersion, so it changes only the object just written.
//
// Flux's controllers write the object right after it is created (their
// finalizer), so the patch often meets a newer resourceVersion: it is then
// computed again from a fresh read of the same object (same UID), instead
// of failing the reconcile with a ReconcileError a user would see.
func (r *ClaimReconciler) ownFields(ctx context.Context, obj, live client.Object) error {
	uid := obj.GetUID()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, legacyFieldManagers, DeliveryFieldManager)
		if err != nil || patch == nil {
			return err
		}
		err = r.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch))
		if !apierrors.IsConflict(err) {
			return err
		}
		if gerr := r.Pipeline.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
			return gerr
		}
		if obj.GetUID() != uid {
			return fmt.Errorf("%s was replaced while packline took over its fields (UID %s, now %s)", obj.GetName(), uid, obj.GetUID())
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("taking over the fields of %s: %w", obj.GetName(), err)
	}
	if obj != live {
		b, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		return runtime.DefaultUnstructuredConverter.FromUnstructured(b, live)
	}
	return nil
}

// controllerOf names an object's controller, for the conflict message.
func controllerOf(o client.Object) string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return fmt.Sprintf("its controller is %s %s", ref.Kind, ref.Name)
	}
	return "it has no controller"
}

// undeliver removes the Flux objects of a Claim whose delivery was turned
// off. Deleting the Kustomization prunes what it applied (with prune on):
// turning delivery off undeploys the workload. Status is only a hint that
// there is something to remove (a tenant can write it): the objects are
// the Claim's name, and each is deleted only if the Claim controls it, with
// its UID as a precondition.
func (r *ClaimReconciler) undeliver(ctx context.Context, c *v1alpha1.Claim) error {
	if c.Status.Delivery == nil {
		return nil
	}
	key := client.ObjectKey{Namespace: c.Namespace, Name: c.Name}
	for _, o := range []client.Object{&kustomizev1.Kustomization{}, &sourcev1.OCIRepository{}} {
		err := r.Pipeline.APIReader.Get(ctx, key, o)
		switch {
		case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
			continue
		case err != nil:
			return err
		case !metav1.IsControlledBy(o, c):
			continue
		}
		uid := o.GetUID()
		if err := r.Client.Delete(ctx, o, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	c.Status.Delivery = nil
	apimeta.RemoveStatusCondition(&c.Status.Conditions, v1alpha1.ConditionDelivered)
	apimeta.RemoveStatusCondition(&c.Status.Conditions, v1alpha1.ConditionDrifted)
	return nil
}
