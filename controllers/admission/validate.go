package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/delivery"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// +kubebuilder:webhook:path=/validate-packline-dev-v1alpha1-claim,mutating=false,failurePolicy=fail,sideEffects=None,groups=packline.dev,resources=claims,verbs=create;update,versions=v1alpha1,name=vclaim.packline.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-packline-dev-v1alpha1-artifact,mutating=false,failurePolicy=fail,sideEffects=None,groups=packline.dev,resources=artifacts,verbs=create;update,versions=v1alpha1,name=vartifact.packline.dev,admissionReviewVersions=v1,timeoutSeconds=10

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Validator is the validating webhook of one kind.
type Validator struct {
	kind    kindOf
	decoder admission.Decoder
	sealer  *entitlement.Sealer
	// check returns the denial, or warnings for an admitted object.
	check func(ctx context.Context, obj client.Object, r entitlement.Requester) (warnings []string, err error)
	// instances warns about an instance label no manager serves.
	instances *instances
}

// Handle admits a create or spec change only when the requester is
// entitled to it. An update that leaves the spec alone needs no new rights.
// Any admitted change is told when its instance label names an instance no
// manager runs (a label edit moves the object).
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	return v.instances.withInstanceWarning(ctx, v.kind.name, req, v.handle(ctx, req))
}

func (v *Validator) handle(ctx context.Context, req admission.Request) admission.Response {
	obj := v.kind.new()
	if err := decode(v.decoder, req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if req.Operation == admissionv1.Update {
		old := v.kind.new()
		if err := decode(v.decoder, req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if same, err := sameSpec(v.kind.spec(old), v.kind.spec(obj)); err != nil || same {
			if err != nil {
				return admission.Errored(http.StatusBadRequest, err)
			}
			return admission.Allowed("")
		}
	}
	r := entitlement.FromUserInfo(req.UserInfo)
	// The mutating webhook must have recorded exactly this user; anything
	// else means it did not run (or something rewrote its annotation).
	got, err := v.sealer.Verify(v.kind.name, obj, v.kind.spec(obj))
	switch {
	case errors.Is(err, entitlement.ErrNoKey):
		return admission.Errored(http.StatusServiceUnavailable, err)
	case err != nil:
		return admission.Denied(fmt.Sprintf("metadata.annotations[%s]: %v; it is written by packline's mutating webhook only, remove it from your manifest", v1alpha1.AnnotationRequester, err))
	case got.Username != r.Username:
		return admission.Denied(fmt.Sprintf("metadata.annotations[%s] names %q, not the requesting user %q", v1alpha1.AnnotationRequester, got.Username, r.Username))
	}
	if p, ok := obj.(interface{ GetPipelineSpec() *v1alpha1.PipelineSpec }); ok {
		if bad := pipeline.ResourceProblems("spec.resources", p.GetPipelineSpec().Resources); len(bad) > 0 {
			return admission.Denied(strings.Join(bad, "; "))
		}
	}
	warnings, err := v.check(ctx, obj, r)
	if err != nil {
		var denied *entitlement.Denied
		var invalid *invalidError
		switch {
		case errors.As(err, &denied), errors.As(err, &invalid):
			return admission.Denied(err.Error()).WithWarnings(warnings...)
		default:
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// invalidError is input the user must fix (as opposed to an API error).
type invalidError struct{ msgs []string }

func (e *invalidError) Error() string { return strings.Join(e.msgs, "; ") }

// claimChecker holds what the Claim checks read.
type claimChecker struct {
	client  client.Reader
	checker *entitlement.Checker
}

// check runs, for a Claim: the template's existence (a missing one only
// warns, so GitOps may apply a Claim before its template; the controller
// checks again when it appears), the namespace selector, the exposure, the
// values schema, the groups and every RBAC right. All problems are reported
// together, each naming its field.
func (c *claimChecker) check(ctx context.Context, obj client.Object, r entitlement.Requester) ([]string, error) {
	claim := obj.(*v1alpha1.Claim)
	tpl := &v1alpha1.ClaimTemplate{}
	err := c.client.Get(ctx, client.ObjectKey{Name: claim.Spec.TemplateRef.Name}, tpl)
	if apierrors.IsNotFound(err) {
		return []string{fmt.Sprintf("spec.templateRef: ClaimTemplate %q does not exist yet; the Claim waits for it, and is checked against it when it appears", claim.Spec.TemplateRef.Name)}, nil
	}
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{}
	if err := c.client.Get(ctx, client.ObjectKey{Name: claim.Namespace}, ns); err != nil {
		return nil, err
	}
	invalid := &invalidError{}
	if err := claims.Admissible(claim, tpl, ns.Labels); err != nil {
		invalid.msgs = append(invalid.msgs, err.Error())
	}
	d, err := c.delivery(ctx, claim, ns.Labels)
	if err != nil {
		var refusal *delivery.Refusal
		if !errors.As(err, &refusal) {
			return nil, err
		}
		invalid.msgs = append(invalid.msgs, err.Error())
	}
	rights, err := c.checker.ClaimRights(claim, tpl, d)
	if err != nil {
		invalid.msgs = append(invalid.msgs, err.Error())
	}
	// Group membership and RBAC rights are reported as one denial.
	missing := &entitlement.Denied{Requester: r.Username}
	var denied *entitlement.Denied
	if err := entitlement.InGroups(r, tpl); errors.As(err, &denied) {
		missing.Missing = append(missing.Missing, denied.Missing...)
	}
	if err := c.checker.Check(ctx, r, rights); err != nil {
		if !errors.As(err, &denied) {
			return nil, err
		}
		missing.Missing = append(missing.Missing, denied.Missing...)
	}
	if len(missing.Missing) > 0 {
		invalid.msgs = append(invalid.msgs, missing.Error())
	}
	if len(invalid.msgs) > 0 {
		return nil, invalid
	}
	return nil, nil
}

// delivery is what the Claim's delivery asks of the requester's rights, nil
// when it is not delivered; its profile decides both (it may deliver a
// Claim that sets no spec.delivery, and name or pin the ServiceAccount).
// With no valid profile, the Claim's own delivery is checked alone.
func (c *claimChecker) delivery(ctx context.Context, claim *v1alpha1.Claim, nsLabels map[string]string) (*entitlement.Delivery, error) {
	var profiles v1alpha1.EnvironmentProfileList
	if err := c.client.List(ctx, &profiles); err != nil {
		return nil, err
	}
	var spec *v1alpha1.EnvironmentProfileSpec
	if p, err := claims.SelectProfile(profiles.Items, nsLabels); err == nil && p != nil {
		spec = &p.Spec
	}
	d, err := delivery.Resolve(claim, spec)
	if err != nil || d == nil {
		return nil, err
	}
	return &entitlement.Delivery{ServiceAccount: delivery.ClaimServiceAccount(claim, spec)}, nil
}

// checkArtifact: every Secret and PVC the Artifact names must be readable
// by the requester.
func checkArtifact(checker *entitlement.Checker) func(context.Context, client.Object, entitlement.Requester) ([]string, error) {
	return func(ctx context.Context, obj client.Object, r entitlement.Requester) ([]string, error) {
		return nil, checker.Check(ctx, r, entitlement.ArtifactRights(obj.(*v1alpha1.Artifact)))
	}
}
