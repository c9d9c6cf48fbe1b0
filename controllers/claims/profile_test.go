package claims

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// A profile the CRD cannot fully check (or stored before it could) is
// reported invalid naming the field, instead of Valid and then silently
// lowered or refused by Flux.
func TestValidateProfile(t *testing.T) {
	q := resource.MustParse
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	flux := func(f v1alpha1.FluxDelivery) *v1alpha1.ProfileDelivery { return &v1alpha1.ProfileDelivery{Flux: &f} }
	cases := []struct {
		name string
		spec v1alpha1.EnvironmentProfileSpec
		want string // "" for valid
	}{
		{"valid", v1alpha1.EnvironmentProfileSpec{
			WorkerResources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1")}, Limits: corev1.ResourceList{"cpu": q("2")}},
			Delivery:        flux(v1alpha1.FluxDelivery{Interval: dur(time.Minute), Timeout: dur(time.Second)})}, ""},
		{"request above limit", v1alpha1.EnvironmentProfileSpec{
			WorkerResources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("2Gi")}, Limits: corev1.ResourceList{"memory": q("1Gi")}}},
			"spec.workerResources.requests.memory: 2Gi is above its limit 1Gi"},
		{"negative request", v1alpha1.EnvironmentProfileSpec{
			WorkerResources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("-1")}}},
			"spec.workerResources.requests.cpu: -1 must not be negative"},
		{"negative limit", v1alpha1.EnvironmentProfileSpec{
			WorkerResources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": q("-1Gi")}}},
			"spec.workerResources.limits.memory: -1Gi must not be negative"},
		{"negative interval", v1alpha1.EnvironmentProfileSpec{Delivery: flux(v1alpha1.FluxDelivery{Interval: dur(-time.Minute)})},
			"spec.delivery.flux.interval: -1m0s is not a duration of at least 1ms"},
		{"zero timeout", v1alpha1.EnvironmentProfileSpec{Delivery: flux(v1alpha1.FluxDelivery{Timeout: dur(0)})},
			"spec.delivery.flux.timeout: 0s is not a duration of at least 1ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateProfile(&v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid profile refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

// `{"$patch": "delete"}` as the value of a Field binding used to reach the
// render and stall with a Kustomize-internal message; it is refused at
// admission (Violations is what the webhook runs), naming where it is.
func TestFieldValuesRefusePatchDirectives(t *testing.T) {
	tpl := &v1alpha1.ClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ClaimTemplateSpec{Parameters: []v1alpha1.ParameterBinding{
		{Value: "affinity", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "app"}, FieldPath: "/spec/template/spec/affinity"},
		{Value: "image", Kind: v1alpha1.BindingImage, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "app"}},
	}}}
	claim := func(values string) *v1alpha1.Claim {
		return &v1alpha1.Claim{Spec: v1alpha1.ClaimSpec{Values: &apiextensionsv1.JSON{Raw: []byte(values)}}}
	}
	cases := []struct{ name, values, want string }{
		{"plain object", `{"affinity":{"nodeAffinity":{"x":[1,2]}}}`, ""},
		{"directive at the top", `{"affinity":{"$patch":"delete"}}`, `spec.values.affinity.$patch: "$patch" is a Kustomize patch directive, not a value; spec.parameters[0] of ClaimTemplate web writes this value into Deployment app at /spec/template/spec/affinity`},
		{"directive deep in a list", `{"affinity":{"a":[{"b":1},{"$setElementOrder/containers":[]}]}}`, `spec.values.affinity.a[1].$setElementOrder/containers`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			for _, v := range Violations(claim(tc.values), tpl, nil) {
				if v.Reason == ReasonInvalidValues {
					got = v.Err.Error()
				}
			}
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("violation %q, want %q", got, tc.want)
			}
		})
	}
}
