package delivery

import (
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func claim(d *v1alpha1.FluxDelivery) *v1alpha1.Claim {
	c := &v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}}
	if d != nil {
		c.Spec.Delivery = &v1alpha1.Delivery{Flux: d}
	}
	c.Status.Digest = digest
	c.Status.Reference = "registry.example.com/claims/team-a/web@" + digest
	return c
}

func TestResolve(t *testing.T) {
	minute := &metav1.Duration{Duration: time.Minute}
	profile := func(d *v1alpha1.ProfileDelivery) *v1alpha1.EnvironmentProfileSpec {
		return &v1alpha1.EnvironmentProfileSpec{Delivery: d}
	}
	cases := []struct {
		name    string
		own     *v1alpha1.FluxDelivery
		profile *v1alpha1.EnvironmentProfileSpec
		want    *v1alpha1.FluxDelivery
		wantErr bool
	}{
		{name: "neither delivers"},
		{name: "profile without delivery", profile: profile(nil)},
		{name: "claim only", own: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer"},
			want: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer"}},
		{name: "profile default", profile: profile(&v1alpha1.ProfileDelivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant", Timeout: minute}}),
			want: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant", Timeout: minute}},
		{name: "claim fields win, profile fills the rest",
			own:     &v1alpha1.FluxDelivery{Prune: ptr.To(false)},
			profile: profile(&v1alpha1.ProfileDelivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant", Prune: ptr.To(true), Timeout: minute}}),
			want:    &v1alpha1.FluxDelivery{ServiceAccountName: "tenant", Prune: ptr.To(false), Timeout: minute}},
		{name: "required service account missing", own: &v1alpha1.FluxDelivery{},
			profile: profile(&v1alpha1.ProfileDelivery{RequireServiceAccount: true}), wantErr: true},
		{name: "required service account given by the claim", own: &v1alpha1.FluxDelivery{ServiceAccountName: "deployer"},
			profile: profile(&v1alpha1.ProfileDelivery{RequireServiceAccount: true}),
			want:    &v1alpha1.FluxDelivery{ServiceAccountName: "deployer"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(claim(tc.own), tc.profile)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuilders(t *testing.T) {
	c := claim(nil)
	c.Spec.Target = &v1alpha1.Target{PlainHTTP: true, PushSecretRef: &corev1.LocalObjectReference{Name: "push"}}
	p := NewPlan(c, &v1alpha1.FluxDelivery{Wait: ptr.To(false)}, false)
	want := Plan{Name: "web", Namespace: "team-a", Repository: "registry.example.com/claims/team-a/web", Digest: digest,
		Insecure: true, PullSecret: "push", ServiceAccount: DefaultServiceAccount, Prune: true, Wait: false,
		Timeout: DefaultTimeout, Interval: DefaultInterval}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if r := OCIRepository(p); r.Spec.Verify != nil {
		t.Errorf("an unsigned Claim's OCIRepository verifies: %+v", r.Spec.Verify)
	}
	signed := claim(nil)
	signed.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign"}}
	if v := OCIRepository(NewPlan(signed, &v1alpha1.FluxDelivery{}, false)).Spec.Verify; v == nil || v.Provider != "cosign" || v.SecretRef.Name != "cosign" {
		t.Errorf("a Claim signed with its own key is not verified with that Secret's cosign.pub: %+v", v)
	}
	explicit := &v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "team-pub"}}
	if v := OCIRepository(NewPlan(signed, explicit, false)).Spec.Verify; v == nil || v.SecretRef.Name != "team-pub" {
		t.Errorf("verifySecretRef ignored: %+v", v)
	}
	if private := NewPlan(c, &v1alpha1.FluxDelivery{}, true); private.PullSecret != "" {
		t.Errorf("a private template's push Secret (template namespace) reached the tenant's OCIRepository: %q", private.PullSecret)
	}
	r := OCIRepository(p)
	if r.Spec.URL != "oci://registry.example.com/claims/team-a/web" || r.Spec.Reference.Digest != digest || r.Spec.Reference.Tag != "" ||
		!r.Spec.Insecure || r.Spec.SecretRef == nil || r.Spec.SecretRef.Name != "push" {
		t.Errorf("OCIRepository spec = %+v", r.Spec)
	}
	k := Kustomization(p)
	if k.Spec.SourceRef.Kind != "OCIRepository" || k.Spec.SourceRef.Name != "web" || k.Spec.ServiceAccountName != DefaultServiceAccount ||
		k.Spec.TargetNamespace != "team-a" || !k.Spec.Prune || k.Spec.Wait || k.Spec.Path != "./" {
		t.Errorf("Kustomization spec = %+v", k.Spec)
	}
}

func TestObserve(t *testing.T) {
	ks := func(status metav1.ConditionStatus, reason, applied string, stale bool) *kustomizev1.Kustomization {
		k := &kustomizev1.Kustomization{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		gen := int64(2)
		if stale {
			gen = 1
		}
		k.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: status, Reason: reason, Message: reason + " message", ObservedGeneration: gen}}
		k.Status.LastAppliedRevision = applied
		return k
	}
	cases := []struct {
		name string
		k    *kustomizev1.Kustomization
		want Observed
	}{
		{"not created", nil, Observed{Delivered: metav1.Condition{Status: metav1.ConditionUnknown, Reason: ReasonDelivering}}},
		{"applied", ks(metav1.ConditionTrue, "ReconciliationSucceeded", digest, false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded"}, Applied: digest, Done: true}},
		{"applied with a tag prefix", ks(metav1.ConditionTrue, "ReconciliationSucceeded", "latest@"+digest, false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded"}, Applied: "latest@" + digest, Done: true}},
		{"health check failed", ks(metav1.ConditionFalse, "HealthCheckFailed", digest, false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionFalse, Reason: "HealthCheckFailed"}, Applied: digest}},
		{"Flux still on the spec before", ks(metav1.ConditionTrue, "ReconciliationSucceeded", digest, true),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionUnknown, Reason: ReasonDelivering}, Applied: digest}},
		{"another revision applied", ks(metav1.ConditionTrue, "ReconciliationSucceeded", "sha256:ffff", false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded"}, Applied: "sha256:ffff", Drifted: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(tc.k, digest)
			got.Delivered = metav1.Condition{Status: got.Delivered.Status, Reason: got.Delivered.Reason}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
