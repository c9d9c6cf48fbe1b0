package pipeline

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// WorkerResources layers the worker container's requests and limits: the
// manager's defaults (flags), then the EnvironmentProfile's, then the
// resource's spec.resources, each per resource name. A request left above
// its limit by the layering (say a default 256Mi request under a user's
// 128Mi limit) is lowered to the limit, as Kubernetes does for a pod with
// only limits, so the layering alone never makes an invalid pod.
func WorkerResources(layers ...*corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, l := range layers {
		if l == nil {
			continue
		}
		for k, v := range l.Requests {
			out.Requests[k] = v.DeepCopy()
		}
		for k, v := range l.Limits {
			out.Limits[k] = v.DeepCopy()
		}
	}
	for k, req := range out.Requests {
		if lim, ok := out.Limits[k]; ok && req.Cmp(lim) > 0 {
			out.Requests[k] = lim.DeepCopy()
		}
	}
	if len(out.Requests) == 0 {
		out.Requests = nil
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	return out
}

// ResourceProblems names each negative quantity and each request above its
// limit in r, the field written under field (for example
// "spec.resources"), sorted; empty when r is fine. A negative request is
// refused by the API server only when the Job is made, and a request above
// its limit would be silently lowered by WorkerResources, so both are
// refused where the user wrote them. (A CEL rule cannot do this: the API
// server's cost estimate for a rule over two unbounded quantity maps
// exceeds its budget.)
func ResourceProblems(field string, r *corev1.ResourceRequirements) []string {
	if r == nil {
		return nil
	}
	var bad []string
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for name, q := range l.list {
			if q.Sign() < 0 {
				bad = append(bad, fmt.Sprintf("%s.%s.%s: %s must not be negative", field, l.name, name, q.String()))
			}
		}
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 && req.Sign() >= 0 {
			bad = append(bad, fmt.Sprintf("%s.requests.%s: %s is above its limit %s", field, name, req.String(), lim.String()))
		}
	}
	sort.Strings(bad)
	return bad
}

// ParseResourceList reads "cpu=250m,memory=256Mi" (a manager flag).
func ParseResourceList(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=quantity", kv)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", kv, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%q: must not be negative", kv)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, nil
}
