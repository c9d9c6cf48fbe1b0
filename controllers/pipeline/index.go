package pipeline

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IndexOwnerUID indexes the cached Jobs and PVCs by their owner-uid label.
// A run's children may be in the owner's namespace or in another one (see
// Work.Namespace), so they are looked up across namespaces; with the index
// that costs the same whatever the number of packline's Jobs in the
// cluster, where a label selector alone would scan every cached one.
const IndexOwnerUID = "packline.dev/owner-uid"

// IndexChildren registers IndexOwnerUID with the manager's cache, once,
// before the pipelines start.
func IndexChildren(ctx context.Context, idx client.FieldIndexer) error {
	uid := func(o client.Object) []string {
		if v := o.GetLabels()[LabelOwnerUID]; v != "" {
			return []string{v}
		}
		return nil
	}
	for _, o := range []client.Object{&batchv1.Job{}, &corev1.PersistentVolumeClaim{}} {
		if err := idx.IndexField(ctx, o, IndexOwnerUID, uid); err != nil {
			return err
		}
	}
	return nil
}
