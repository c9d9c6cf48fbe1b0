// Package admission holds packline's admission webhooks. The mutating
// webhook records who asked for a Claim or Artifact, sealed so that the
// controller can trust it; the validating webhooks check that the requester
// is entitled to what the spec asks for (controllers/entitlement) and that a
// Claim fits its template, so a tenant learns what to fix at kubectl apply.
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/entitlement"
)

// Paths of the webhooks, served by the manager and named in config/webhook.
const (
	MutateClaimPath      = "/mutate-packline-dev-v1alpha1-claim"
	MutateArtifactPath   = "/mutate-packline-dev-v1alpha1-artifact"
	ValidateClaimPath    = "/validate-packline-dev-v1alpha1-claim"
	ValidateArtifactPath = "/validate-packline-dev-v1alpha1-artifact"
)

// +kubebuilder:webhook:path=/mutate-packline-dev-v1alpha1-claim,mutating=true,failurePolicy=fail,sideEffects=None,groups=packline.dev,resources=claims,verbs=create;update,versions=v1alpha1,name=mclaim.packline.dev,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=IfNeeded
// +kubebuilder:webhook:path=/mutate-packline-dev-v1alpha1-artifact,mutating=true,failurePolicy=fail,sideEffects=None,groups=packline.dev,resources=artifacts,verbs=create;update,versions=v1alpha1,name=martifact.packline.dev,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=IfNeeded

// kindOf is what the mutator and validators need of each kind.
type kindOf struct {
	name string
	new  func() client.Object
	spec func(client.Object) any
}

var (
	claimKind = kindOf{name: "Claim", new: func() client.Object { return &v1alpha1.Claim{} },
		spec: func(o client.Object) any { return o.(*v1alpha1.Claim).Spec }}
	artifactKind = kindOf{name: "Artifact", new: func() client.Object { return &v1alpha1.Artifact{} },
		spec: func(o client.Object) any { return o.(*v1alpha1.Artifact).Spec }}
)

// Stamper is the mutating webhook of one kind.
type Stamper struct {
	kind    kindOf
	decoder admission.Decoder
	sealer  *entitlement.Sealer
}

// Handle records the requesting user on create and on every spec change.
// Any other update (finalizers, labels, another annotation) keeps the
// recorded requester exactly, so neither the controller's own updates nor a
// user's edit of the annotation can change it.
func (m *Stamper) Handle(_ context.Context, req admission.Request) admission.Response {
	obj := m.kind.new()
	if err := m.decoder.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var stamp map[string]string
	if req.Operation == admissionv1.Update {
		old := m.kind.new()
		if err := m.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		same, err := sameSpec(m.kind.spec(old), m.kind.spec(obj))
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if same {
			stamp = map[string]string{}
			for _, k := range []string{v1alpha1.AnnotationRequester, v1alpha1.AnnotationRequesterSeal} {
				if v, ok := old.GetAnnotations()[k]; ok {
					stamp[k] = v
				}
			}
		}
	}
	if stamp == nil {
		var err error
		stamp, err = m.sealer.Seal(m.kind.name, obj, m.kind.spec(obj), entitlement.FromUserInfo(req.UserInfo))
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("recording the requester: %w", err))
		}
	}
	warning := dropEmptyInstance(obj)
	ann := maps.Clone(obj.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	delete(ann, v1alpha1.AnnotationRequester)
	delete(ann, v1alpha1.AnnotationRequesterSeal)
	maps.Copy(ann, stamp)
	obj.SetAnnotations(ann)
	patched, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, patched)
	if warning != "" {
		resp.Warnings = append(resp.Warnings, warning)
	}
	return resp
}

func sameSpec(a, b any) (bool, error) {
	ca, err := entitlement.Canonical(a)
	if err != nil {
		return false, err
	}
	cb, err := entitlement.Canonical(b)
	if err != nil {
		return false, err
	}
	return string(ca) == string(cb), nil
}
