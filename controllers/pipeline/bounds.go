package pipeline

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
)

// AdminVerifyFloor is the shortest spec.verifyInterval of an admin run:
// each check is a Job in the template namespace, with the platform's
// credential, so a tenant's one-minute interval would run 1440 of them a
// day on the platform's quota.
const AdminVerifyFloor = time.Hour

// AdminBounds are the platform's values that cap an admin run's spec: the
// manager's defaults with the EnvironmentProfile's over them.
type AdminBounds struct {
	// Resources are the worker's requests and limits (WorkerResources of
	// the manager's and the profile's).
	Resources corev1.ResourceRequirements
	// Workspace holds the size and class (the profile's, else defaults).
	Workspace WorkspaceParams
	Timeout   time.Duration
	// RetryLimit is the manager's --default-retry-limit.
	RetryLimit int32
}

// BoundAdminSpec is the spec an admin run follows. An admin run (a private
// template's or a signing profile's Claim) runs in the template namespace:
// there it spends the platform's ResourceQuota and LocalQueues, not the
// tenant's, so what the tenant wrote may ask for less than the platform
// gives, never more:
//   - resources: each tenant value at most the platform's; names the
//     platform does not request (say a GPU) are dropped from requests;
//   - workspace: size at most the platform's; the class is the
//     platform's; reclaimPolicy Retain is ignored (it would keep the
//     platform's storage after success);
//   - queueName: ignored (a LocalQueue of the template namespace is the
//     platform's to hand out), so the run is not queued;
//   - timeout and retryLimit: at most the manager's defaults;
//   - verifyInterval: at least AdminVerifyFloor.
func BoundAdminSpec(tenant *v1alpha1.PipelineSpec, b AdminBounds) *v1alpha1.PipelineSpec {
	out := tenant.DeepCopy()
	out.QueueName = ""
	out.Resources = capResources(tenant.Resources, b.Resources)
	out.Workspace = nil
	if ws := tenant.Workspace; ws != nil && ws.Size != nil {
		size := *workspaceSize(b.Workspace)
		if ws.Size.Cmp(size) < 0 {
			size = *ws.Size
		}
		out.Workspace = &v1alpha1.WorkspaceSpec{Size: ptr.To(size.DeepCopy())}
	}
	if tenant.Timeout != nil && b.Timeout > 0 && tenant.Timeout.Duration > b.Timeout {
		out.Timeout = &metav1.Duration{Duration: b.Timeout}
	}
	if tenant.RetryLimit != nil && *tenant.RetryLimit > b.RetryLimit {
		out.RetryLimit = ptr.To(b.RetryLimit)
	}
	if iv := tenant.VerifyInterval; iv != nil && iv.Duration < AdminVerifyFloor {
		out.VerifyInterval = &metav1.Duration{Duration: AdminVerifyFloor}
	}
	return out
}

// capResources keeps the tenant's values that are at most the platform's.
// A limit the platform does not set only restricts the worker, so it stays.
func capResources(tenant *corev1.ResourceRequirements, platform corev1.ResourceRequirements) *corev1.ResourceRequirements {
	if tenant == nil {
		return nil
	}
	out := &corev1.ResourceRequirements{}
	capList := func(in, bound corev1.ResourceList, keepUnbounded bool) corev1.ResourceList {
		var l corev1.ResourceList
		for name, v := range in {
			b, ok := bound[name]
			switch {
			case !ok && !keepUnbounded:
				continue
			case ok && v.Cmp(b) > 0:
				v = b
			}
			if l == nil {
				l = corev1.ResourceList{}
			}
			l[name] = v.DeepCopy()
		}
		return l
	}
	out.Requests = capList(tenant.Requests, platformRequests(platform), false)
	out.Limits = capList(tenant.Limits, platform.Limits, true)
	return out
}

// platformRequests bounds the tenant's requests: the platform's request for
// a name, else its limit (a request above the limit would be invalid).
func platformRequests(p corev1.ResourceRequirements) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range p.Limits {
		out[name] = q
	}
	for name, q := range p.Requests {
		out[name] = q
	}
	return out
}

// runSpec is the spec the current run follows: the owner's, bounded by
// the platform's for an admin run (see BoundAdminSpec).
func (p *Pipeline) runSpec(s *scope) *v1alpha1.PipelineSpec {
	ps := s.obj.GetPipelineSpec()
	if !s.remote() {
		return ps
	}
	ws := s.work.WorkspaceDefaults
	return BoundAdminSpec(ps, AdminBounds{
		Resources:  WorkerResources(&p.Config.WorkerResources, s.work.Resources),
		Workspace:  ws,
		Timeout:    p.Config.DefaultTimeout,
		RetryLimit: p.Config.DefaultRetryLimit,
	})
}
