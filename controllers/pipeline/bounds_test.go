package pipeline

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
)

// An admin run spends the platform's quota: the tenant may ask for less
// than the platform's values, never more, and picks no queue, class or
// Retain.
func TestBoundAdminSpec(t *testing.T) {
	q := resource.MustParse
	bounds := AdminBounds{
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: q("2Gi")},
		},
		Workspace:  WorkspaceParams{Size: ptr.To(q("20Gi")), StorageClass: ptr.To("platform")},
		Timeout:    6 * time.Hour,
		RetryLimit: 3,
	}
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	for _, tc := range []struct {
		name   string
		tenant v1alpha1.PipelineSpec
		want   v1alpha1.PipelineSpec
	}{
		{name: "nothing set", tenant: v1alpha1.PipelineSpec{}, want: v1alpha1.PipelineSpec{}},
		{name: "asking for more is capped",
			tenant: v1alpha1.PipelineSpec{
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: q("64"), corev1.ResourceMemory: q("512Gi"), "nvidia.com/gpu": q("8")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: q("1Ti")},
				},
				Workspace: &v1alpha1.WorkspaceSpec{Size: ptr.To(q("10Ti")), StorageClassName: ptr.To("premium"), ReclaimPolicy: v1alpha1.ReclaimRetain},
				QueueName: "tenant-queue", Timeout: d(168 * time.Hour), RetryLimit: ptr.To[int32](20), VerifyInterval: d(time.Minute),
			},
			want: v1alpha1.PipelineSpec{
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: q("2Gi")},
				},
				Workspace: &v1alpha1.WorkspaceSpec{Size: ptr.To(q("20Gi"))},
				Timeout:   d(6 * time.Hour), RetryLimit: ptr.To[int32](3), VerifyInterval: d(AdminVerifyFloor),
			}},
		{name: "asking for less stands",
			tenant: v1alpha1.PipelineSpec{
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: q("1Gi"), corev1.ResourceCPU: q("1")},
				},
				Workspace: &v1alpha1.WorkspaceSpec{Size: ptr.To(q("1Gi"))},
				Timeout:   d(time.Hour), RetryLimit: ptr.To[int32](1), VerifyInterval: d(24 * time.Hour),
			},
			want: v1alpha1.PipelineSpec{
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: q("1Gi"), corev1.ResourceCPU: q("1")},
				},
				Workspace: &v1alpha1.WorkspaceSpec{Size: ptr.To(q("1Gi"))},
				Timeout:   d(time.Hour), RetryLimit: ptr.To[int32](1), VerifyInterval: d(24 * time.Hour),
			}},
		{name: "only a class: the platform's class and size",
			tenant: v1alpha1.PipelineSpec{Workspace: &v1alpha1.WorkspaceSpec{StorageClassName: ptr.To("premium")}},
			want:   v1alpha1.PipelineSpec{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := BoundAdminSpec(&tc.tenant, bounds)
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("BoundAdminSpec (-want +got):\n%s", diff)
			}
		})
	}
}
