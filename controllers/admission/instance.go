package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/packline/packline/controllers/pipeline"
)

// dropEmptyInstance removes an empty packline.dev/instance label: "" means
// the default instance, whose managers select objects without the label (a
// label selector cannot say "absent or empty"). Removed here, the object is
// the default instance's like any other, instead of no manager's.
func dropEmptyInstance(obj client.Object) (warning string) {
	l := obj.GetLabels()
	if v, ok := l[pipeline.LabelInstance]; !ok || v != "" {
		return ""
	}
	l = maps.Clone(l)
	delete(l, pipeline.LabelInstance)
	obj.SetLabels(l)
	return fmt.Sprintf("metadata.labels[%s]: an empty value means the default instance; the label was removed", pipeline.LabelInstance)
}

// instances reads the Leases that running managers publish (see
// pipeline.InstancePublisher), past the cache.
type instances struct {
	reader    client.Reader
	namespace string
	now       func() time.Time
}

// warning says when no manager serves the instance obj is labelled for.
// It only warns: GitOps may apply objects before their manager, and a
// check that cannot run must not refuse them.
func (in *instances) warning(ctx context.Context, kind string, raw []byte) string {
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return ""
	}
	instance := meta.Metadata.Labels[pipeline.LabelInstance]
	if instance == "" {
		return ""
	}
	lease := &coordinationv1.Lease{}
	err := in.reader.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: pipeline.InstanceLeaseName(instance)}, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return fmt.Sprintf("metadata.labels[%s]: could not check that a manager runs instance %q: %v", pipeline.LabelInstance, instance, err)
	}
	return pipeline.InstanceWarning(kind, instance, lease, in.now())
}

// withInstanceWarning adds, to an admitted request, the warning about its
// instance label.
func (in *instances) withInstanceWarning(ctx context.Context, kind string, req admission.Request, resp admission.Response) admission.Response {
	if in == nil || !resp.Allowed {
		return resp
	}
	if w := in.warning(ctx, kind, req.Object.Raw); w != "" {
		resp.Warnings = append(resp.Warnings, w)
	}
	return resp
}
