package pipeline

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// LabelInstance assigns an Artifact or Claim to one manager instance
// (--instance), and marks the children that instance made. Several managers
// then share a cluster, each owning exactly its own resources: one without
// the label belongs to the default instance (--instance unset).
//
// A label rather than a spec field: the managers' caches filter on it, so an
// instance never even holds another's objects in memory, and moving a
// resource is a label edit that needs no new generation.
const LabelInstance = "packline.dev/instance"

// ValidateInstance checks an --instance value: it becomes a label value.
func ValidateInstance(name string) error {
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return fmt.Errorf("--instance %q: %v", name, errs)
	}
	return nil
}

// InstanceSelector selects the objects of one instance: labelled with its
// name, or, for the default instance, not labelled at all.
func InstanceSelector(instance string) labels.Selector {
	op, vals := selection.Equals, []string{instance}
	if instance == "" {
		op, vals = selection.DoesNotExist, nil
	}
	r, err := labels.NewRequirement(LabelInstance, op, vals)
	if err != nil {
		// Only an invalid name can fail; ValidateInstance runs first.
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}

// OwnedSelector selects the Jobs, Pods and PVCs one instance made.
func OwnedSelector(instance string) labels.Selector {
	managed, _ := labels.NewRequirement(LabelManagedBy, selection.Equals, []string{managedBy})
	reqs, _ := InstanceSelector(instance).Requirements()
	return labels.NewSelector().Add(*managed).Add(reqs...)
}

// instanceLabels is what OwnerLabels adds for a named instance.
func instanceLabels(l map[string]string, instance string) map[string]string {
	if instance != "" {
		l[LabelInstance] = instance
	}
	return l
}

// takeOver relabels a child that the owner's previous instance made (same
// owner UID, another instance label), with its pods, so that this
// instance's caches see it: a resource moved between instances goes on with
// the Job already running, never a duplicate. Only metadata changes, so
// Kueue's ownership of the Job spec is untouched.
func (p *Pipeline) takeOver(ctx context.Context, obj client.Object) error {
	if obj.GetLabels()[LabelInstance] == p.Config.Instance {
		return nil
	}
	if err := p.relabel(ctx, obj); err != nil {
		return err
	}
	if job, ok := obj.(*batchv1.Job); ok {
		// Only the Job's own pods: relabelling a look-alike would let it
		// into this instance's cache.
		pods, err := JobPods(ctx, p.APIReader, job)
		if err != nil {
			return err
		}
		for i := range pods {
			if err := p.relabel(ctx, &pods[i]); err != nil {
				return err
			}
		}
	}
	logf.FromContext(ctx).Info("took over a child of another instance", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName(), "instance", p.Config.Instance)
	return nil
}

func (p *Pipeline) relabel(ctx context.Context, obj client.Object) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	delete(l, LabelInstance)
	obj.SetLabels(instanceLabels(l, p.Config.Instance))
	if err := p.Client.Patch(ctx, obj, patch); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("relabelling %s for instance %q: %w", obj.GetName(), p.Config.Instance, err))
	}
	return nil
}
