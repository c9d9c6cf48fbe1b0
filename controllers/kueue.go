package controllers

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/packline/packline/controllers/pipeline"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// watchWorkloads wakes a queued run when Kueue's Workload for its Job
// changes (its QuotaReserved condition says why it waits), and lets the
// pipeline read Workloads from the cache. Only when the cluster serves
// Workloads: a watch on a kind it does not serve would stop the manager,
// and without Kueue a queued Job just stays suspended.
func watchWorkloads(mgr ctrl.Manager, b *builder.Builder, p *pipeline.Pipeline, kind string) *builder.Builder {
	gvk := pipeline.WorkloadGVK
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return b
	}
	p.Workloads = mgr.GetCache()
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(gvk)
	return b.Watches(wl, handler.EnqueueRequestsFromMapFunc(workloadOwner(mgr.GetClient(), kind)))
}

// workloadOwner maps a Workload to the Artifact or Claim of the Job that
// owns it, through the Job in the cache (only packline's Jobs are there,
// with their labels).
func workloadOwner(c client.Reader, kind string) handler.MapFunc {
	owner := podOwner(kind)
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
				continue
			}
			job := &batchv1.Job{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, job); err != nil || job.UID != ref.UID {
				continue
			}
			return owner(ctx, job)
		}
		return nil
	}
}
