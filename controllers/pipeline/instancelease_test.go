package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

func TestInstanceLeaseName(t *testing.T) {
	cases := map[string]string{
		"":     "packline-instance",
		"blue": "packline-instance-blue",
		// Label values a Lease name cannot hold are hashed.
		"Team_A":                "packline-instance-" + short(hashOf("Team_A"), 16),
		strings.Repeat("a", 63): "packline-instance-" + short(hashOf(strings.Repeat("a", 63)), 16),
	}
	for instance, want := range cases {
		got := InstanceLeaseName(instance)
		if got != want {
			t.Errorf("InstanceLeaseName(%q) = %q, want %q", instance, got, want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("%q is not a valid Lease name: %v", got, errs)
		}
	}
}

func TestInstanceWarning(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	lease := func(instance string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: InstanceLeaseName(instance), Namespace: "packline-system", Labels: map[string]string{LabelInstance: instance}},
			Spec:       coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(renewed)), LeaseDurationSeconds: ptr.To[int32](60)},
		}
	}
	const none = `metadata.labels[packline.dev/instance]: no packline manager runs instance "blue", so nothing will reconcile this Artifact until one is started with --instance=blue, or the label is changed`
	cases := []struct {
		name  string
		lease *coordinationv1.Lease
		want  string
	}{
		{"served", lease("blue", now.Add(-10*time.Second)), ""},
		{"no lease", nil, none},
		{"another instance's lease (a hash collision)", lease("green", now), none},
		{"never renewed", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelInstance: "blue"}}}, none},
		{"stale", lease("blue", now.Add(-5*time.Minute)),
			`metadata.labels[packline.dev/instance]: the manager of instance "blue" was last seen 5m0s ago (Lease packline-system/packline-instance-blue), so nothing may reconcile this Artifact`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, InstanceWarning("Artifact", "blue", tc.lease, now)); diff != "" {
				t.Errorf("InstanceWarning (-want +got):\n%s", diff)
			}
		})
	}
}
