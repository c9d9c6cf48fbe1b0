package delivery

import (
	"errors"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
		// Issue 26: the Claim's own verifySecretRef was dropped, so Flux
		// applied unverified.
		{name: "claim's verifySecretRef", own: &v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "team-pub"}},
			want: &v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "team-pub"}}},
		{name: "claim's verifySecretRef over the profile's",
			own:     &v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "team-pub"}},
			profile: profile(&v1alpha1.ProfileDelivery{Flux: &v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "platform-pub"}}}),
			want:    &v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "team-pub"}}},
		{name: "pinned service account fills an unnamed one", own: &v1alpha1.FluxDelivery{},
			profile: profile(&v1alpha1.ProfileDelivery{PinServiceAccount: true, Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}}),
			want:    &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}},
		{name: "pinned service account named again", own: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"},
			profile: profile(&v1alpha1.ProfileDelivery{PinServiceAccount: true, Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}}),
			want:    &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}},
		{name: "pinned service account, claim names another", own: &v1alpha1.FluxDelivery{ServiceAccountName: "admin"},
			profile: profile(&v1alpha1.ProfileDelivery{PinServiceAccount: true, Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}}),
			wantErr: true},
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

func TestResolveRefusals(t *testing.T) {
	pinned := &v1alpha1.EnvironmentProfileSpec{Delivery: &v1alpha1.ProfileDelivery{PinServiceAccount: true, Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}}}
	_, err := Resolve(claim(&v1alpha1.FluxDelivery{ServiceAccountName: "admin"}), pinned)
	want := &Refusal{Reason: ReasonServiceAccountPinned, Message: `spec.delivery.flux.serviceAccountName: the EnvironmentProfile of namespace team-a pins the ServiceAccount Flux applies as to "tenant"; remove the field or set it to "tenant"`}
	if diff := cmp.Diff(error(want), err, cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_, err = Resolve(claim(&v1alpha1.FluxDelivery{}), &v1alpha1.EnvironmentProfileSpec{Delivery: &v1alpha1.ProfileDelivery{RequireServiceAccount: true}})
	if r, ok := err.(*Refusal); !ok || r.Reason != ReasonServiceAccountRequired {
		t.Errorf("err = %#v, want a ServiceAccountRequired refusal", err)
	}
}

func TestClaimServiceAccount(t *testing.T) {
	profile := &v1alpha1.EnvironmentProfileSpec{Delivery: &v1alpha1.ProfileDelivery{Flux: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}}}
	cases := []struct {
		name    string
		own     *v1alpha1.FluxDelivery
		profile *v1alpha1.EnvironmentProfileSpec
		want    string
	}{
		{name: "not delivered by the claim", profile: profile},
		{name: "names none", own: &v1alpha1.FluxDelivery{}, profile: profile},
		{name: "names its own", own: &v1alpha1.FluxDelivery{ServiceAccountName: "admin"}, profile: profile, want: "admin"},
		{name: "names its own, no profile", own: &v1alpha1.FluxDelivery{ServiceAccountName: "admin"}, want: "admin"},
		{name: "names the default one", own: &v1alpha1.FluxDelivery{ServiceAccountName: "default"}, want: "default"},
		{name: "names the profile's", own: &v1alpha1.FluxDelivery{ServiceAccountName: "tenant"}, profile: profile},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClaimServiceAccount(claim(tc.own), tc.profile); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVerifyField(t *testing.T) {
	signed := claim(&v1alpha1.FluxDelivery{})
	signed.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: "cosign"}}
	own := claim(&v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "team-pub"}})
	cases := []struct {
		name              string
		c                 *v1alpha1.Claim
		d                 *v1alpha1.FluxDelivery
		secret, wantField string
	}{
		{"unsigned, no key", claim(nil), &v1alpha1.FluxDelivery{}, "", ""},
		{"signed with its own key", signed, &v1alpha1.FluxDelivery{}, "cosign", "spec.signing.keySecretRef"},
		{"claim's key", own, own.Spec.Delivery.Flux, "team-pub", "spec.delivery.flux.verifySecretRef"},
		{"profile's key", claim(nil), &v1alpha1.FluxDelivery{VerifySecretRef: &corev1.LocalObjectReference{Name: "platform-pub"}},
			"platform-pub", "the EnvironmentProfile's spec.delivery.flux.verifySecretRef"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlan(tc.c, tc.d, false)
			if diff := cmp.Diff([2]string{tc.secret, tc.wantField}, [2]string{p.VerifySecret, p.VerifyField}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimField(t *testing.T) {
	for flux, want := range map[string]string{
		"spec.interval":              "spec.delivery.flux.interval",
		"spec.timeout":               "spec.delivery.flux.timeout",
		"spec.verify.secretRef.name": "spec.delivery.flux.verifySecretRef",
		"spec.sourceRef.name":        "",
		"":                           "",
	} {
		if got := ClaimField(flux); got != want {
			t.Errorf("ClaimField(%q) = %q, want %q", flux, got, want)
		}
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
	repo := func(verify bool, conds ...metav1.Condition) *sourcev1.OCIRepository {
		r := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 3}}
		if verify {
			r.Spec.Verify = &sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: "team-pub"}}
		}
		for _, c := range conds {
			c.ObservedGeneration = 3
			r.Status.Conditions = append(r.Status.Conditions, c)
		}
		return r
	}
	// What source-controller reports for a missing key Secret.
	noKey := metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: sourcev1.VerificationError,
		Message: `failed to verify the signature using provider 'cosign': secrets "team-pub" not found`}
	notVerified := metav1.Condition{Type: sourcev1.SourceVerifiedCondition, Status: metav1.ConditionFalse, Reason: sourcev1.VerificationError}
	pullFailed := metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: sourcev1.OCIPullFailedReason, Message: "pull failed"}
	plan := Plan{Name: "web", Digest: digest, VerifySecret: "team-pub", VerifyField: "spec.delivery.flux.verifySecretRef"}
	waiting := ks(metav1.ConditionFalse, "ArtifactFailed", "", false)
	cases := []struct {
		name string
		repo *sourcev1.OCIRepository
		k    *kustomizev1.Kustomization
		want Observed
	}{
		{"not created", nil, nil, Observed{Delivered: metav1.Condition{Status: metav1.ConditionUnknown, Reason: ReasonDelivering}}},
		{"applied", nil, ks(metav1.ConditionTrue, "ReconciliationSucceeded", digest, false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded"}, Applied: digest, Done: true}},
		{"applied with a tag prefix", nil, ks(metav1.ConditionTrue, "ReconciliationSucceeded", "latest@"+digest, false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded"}, Applied: "latest@" + digest, Done: true}},
		{"health check failed", nil, ks(metav1.ConditionFalse, "HealthCheckFailed", digest, false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionFalse, Reason: "HealthCheckFailed"}, Applied: digest}},
		{"Flux still on the spec before", nil, ks(metav1.ConditionTrue, "ReconciliationSucceeded", digest, true),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionUnknown, Reason: ReasonDelivering}, Applied: digest}},
		{"another revision applied", nil, ks(metav1.ConditionTrue, "ReconciliationSucceeded", "sha256:ffff", false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded"}, Applied: "sha256:ffff", Drifted: true}},
		{"key Secret missing", repo(true, noKey, notVerified), waiting,
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonVerificationFailed}}},
		{"key Secret missing, Kustomization not created", repo(true, noKey, notVerified), nil,
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonVerificationFailed}}},
		{"source failing, no verification", repo(false, pullFailed), waiting,
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionFalse, Reason: sourcev1.OCIPullFailedReason}}},
		{"source failing, but the digest is applied", repo(true, noKey), ks(metav1.ConditionTrue, "ReconciliationSucceeded", digest, false),
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionTrue, Reason: "ReconciliationSucceeded"}, Applied: digest, Done: true}},
		{"source ready", repo(true, metav1.Condition{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Succeeded"}), nil,
			Observed{Delivered: metav1.Condition{Status: metav1.ConditionUnknown, Reason: ReasonDelivering}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Observe(plan, tc.repo, tc.k)
			got.Delivered = metav1.Condition{Status: got.Delivered.Status, Reason: got.Delivered.Reason}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	got := Observe(plan, repo(true, noKey, notVerified), waiting).Delivered.Message
	want := `spec.delivery.flux.verifySecretRef: Flux cannot verify ` + digest + ` with the cosign public key in Secret "team-pub" (the Secret is missing, holds no matching key, or the digest is not signed): failed to verify the signature using provider 'cosign': secrets "team-pub" not found`
	if got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}

func TestFailure(t *testing.T) {
	ks := schema.GroupResource{Group: "kustomize.toolkit.fluxcd.io", Resource: "kustomizations"}
	// As the API server refuses a Kustomization against Flux's CRD schema.
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: ks.Group, Kind: "Kustomization"}, "web", field.ErrorList{
		field.Invalid(field.NewPath("spec", "interval"), "-5m0s", `spec.interval in body should match '^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$'`),
		field.Invalid(field.NewPath("spec", "timeout"), "1ns", `spec.timeout in body should match '^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$'`),
	})
	cases := []struct {
		name      string
		err       error
		reason    string
		msgPrefix string
		stall     bool
	}{
		{"Flux's schema", invalid, ReasonDeliveryRejected, "spec.delivery.flux.interval, spec.delivery.flux.timeout: the API server refused the Flux objects of this Claim: Kustomization.kustomize.toolkit.fluxcd.io \"web\" is invalid", true},
		{"a policy", apierrors.NewForbidden(ks, "web", errors.New("platform policy")), ReasonDeliveryRejected, "the API server refused the Flux objects of this Claim: kustomizations.kustomize.toolkit.fluxcd.io \"web\" is forbidden: platform policy", true},
		{"CRD deleted while running", apierrors.NewNotFound(ks, ""), ReasonFluxNotInstalled, "Flux is not installed", true},
		{"CRD absent", &apimeta.NoKindMatchError{GroupKind: schema.GroupKind{Group: ks.Group, Kind: "Kustomization"}}, ReasonFluxNotInstalled, "Flux is not installed", true},
		{"a conflict is retried", apierrors.NewConflict(ks, "web", errors.New("changed")), "", "", false},
		{"a timeout is retried", apierrors.NewServerTimeout(ks, "create", 1), "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg, stall := Failure(tc.err)
			if diff := cmp.Diff([]any{tc.reason, tc.stall}, []any{reason, stall}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(msg, tc.msgPrefix) {
				t.Errorf("message %q, want the prefix %q", msg, tc.msgPrefix)
			}
		})
	}
}
