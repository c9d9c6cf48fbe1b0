package controllers_test

import (
	"errors"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/pipeline"
	"github.com/packline/packline/test/wrappers"
)

// TestClaimInputsHashCoversEveryRule: a Claim blocked by a rule must render
// again when the input that rule reads is fixed, even though the Claim's
// generation does not move; so for every rule, fixing the input outside
// the Claim changes the inputs hash and unblocks it. An unrelated change
// (a namespace label no rule reads) keeps the hash, so nothing re-renders.
func TestClaimInputsHashCoversEveryRule(t *testing.T) {
	baseTemplate := func() *v1alpha1.ClaimTemplate {
		return wrappers.MakeClaimTemplate("web").ForNamespaces(map[string]string{"tenant": "true"}).
			Exposures(v1alpha1.ExposureClusterIP, v1alpha1.ExposureNodePort).Obj()
	}
	claim := wrappers.MakeClaim("c", "team-a", "web").Values(`{"replicas":5}`).Exposure(v1alpha1.ExposureNodePort).Obj()
	profile := func(class string) v1alpha1.EnvironmentProfile {
		return *wrappers.MakeEnvironmentProfile("gpu", map[string]string{"tier": "gpu"}).StorageClass(class).Obj()
	}
	good := func() controllers.ClaimInputs {
		tpl := baseTemplate()
		tpl.Spec.ValuesSchema.Raw = []byte(`{"type":"object","properties":{"replicas":{"type":"integer","maximum":9}}}`)
		return controllers.ClaimInputs{Template: tpl, NamespaceLabels: map[string]string{"tenant": "true"}}
	}
	cases := []struct {
		name      string
		blockedBy string // the rule that blocks before; empty: not blocked
		before    func(*controllers.ClaimInputs)
		after     func(*controllers.ClaimInputs) // optional: more than good()
		sameHash  bool
	}{
		{name: "namespace labelled to match the access selector", blockedBy: claims.ReasonAccessDenied,
			before: func(in *controllers.ClaimInputs) { in.NamespaceLabels = map[string]string{"other": "x"} }},
		{name: "template offers the exposure", blockedBy: claims.ReasonExposureNotOffered,
			before: func(in *controllers.ClaimInputs) { in.Template.Spec.Exposures = in.Template.Spec.Exposures[:1] }},
		{name: "template schema allows the values", blockedBy: claims.ReasonInvalidValues,
			before: func(in *controllers.ClaimInputs) {
				in.Template.Spec.ValuesSchema.Raw = []byte(`{"type":"object","properties":{"replicas":{"type":"integer","maximum":3}}}`)
			}},
		{name: "template gains a repository prefix", blockedBy: claims.ReasonNoTarget,
			before: func(in *controllers.ClaimInputs) { in.Template.Spec.RepositoryPrefix = "" }},
		{name: "namespace labelled into a profile", before: func(in *controllers.ClaimInputs) {
			in.Profiles = []v1alpha1.EnvironmentProfile{profile("fast")}
			in.NamespaceLabels = map[string]string{"tenant": "true", "tier": "gpu"}
		}},
		{name: "chosen profile edited", before: func(in *controllers.ClaimInputs) {
			in.Profiles = []v1alpha1.EnvironmentProfile{profile("slow")}
			in.NamespaceLabels["tier"] = "gpu"
		}, after: func(in *controllers.ClaimInputs) {
			in.Profiles = []v1alpha1.EnvironmentProfile{profile("fast")}
			in.NamespaceLabels["tier"] = "gpu"
		}},
		{name: "an unrelated namespace label", sameHash: true,
			before: func(in *controllers.ClaimInputs) {
				in.NamespaceLabels = map[string]string{"tenant": "true", "cost-center": "42"}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, after := good(), good()
			tc.before(&before)
			if tc.after != nil {
				tc.after(&after)
			}
			hb, reason := inputsHash(t, claim, before)
			ha, afterReason := inputsHash(t, claim, after)
			if reason != tc.blockedBy {
				t.Fatalf("before: blocked by %q, want %q", reason, tc.blockedBy)
			}
			if afterReason != "" {
				t.Fatalf("after the fix: still blocked by %q", afterReason)
			}
			if (hb == ha) != tc.sameHash {
				t.Errorf("hash before %s, after %s: same=%t, want same=%t", hb, ha, hb == ha, tc.sameHash)
			}
		})
	}
}

// inputsHash runs ClaimWork and returns the hash it recorded, and the
// reason it blocked with, if it did.
func inputsHash(t *testing.T, c *v1alpha1.Claim, in controllers.ClaimInputs) (hash, blockedBy string) {
	t.Helper()
	w, err := controllers.ClaimWork(c, in)
	var b *pipeline.Blocked
	switch {
	case errors.As(err, &b):
		return b.InputsHash, b.Reason
	case err != nil:
		t.Fatal(err)
	}
	return w.InputsHash, ""
}
