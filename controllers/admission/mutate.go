// Package admission holds packline's admission webhooks. The mutating
// webhook records who asked for a Claim or Artifact, sealed so that the
// controller can trust it; the validating webhooks check that the requester
// is entitled to what the spec asks for (controllers/entitlement) and that a
// Claim fits its template, so a tenant learns what to fix at kubectl apply.
package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
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
//
// The response patches the two annotations and nothing else: a patch made
// by re-encoding the whole object would drop what the Go types leave out
// (an explicit "" for a defaulted field), the API server would then default
// it again, and the sealed spec would no longer be the stored one.
func (m *Stamper) Handle(_ context.Context, req admission.Request) admission.Response {
	obj := m.kind.new()
	if err := decode(m.decoder, req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var stamp map[string]string
	bind := entitlement.BindCreation(obj, time.Now())
	if req.Operation == admissionv1.Update {
		old := m.kind.new()
		if err := decode(m.decoder, req.OldObject, old); err != nil {
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
		// The stored object's UID: the one the update must keep.
		obj.SetUID(old.GetUID())
		bind = entitlement.BindUID()
	}
	if stamp == nil {
		var err error
		stamp, err = m.sealer.Seal(m.kind.name, obj, m.kind.spec(obj), entitlement.FromUserInfo(req.UserInfo), bind)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("recording the requester: %w", err))
		}
	}
	resp := admission.Patched("", annotationPatch(obj.GetAnnotations(), stamp)...)
	if warning := dropEmptyInstance(obj); warning != "" {
		resp.Patches = append(resp.Patches, jsonpatch.NewOperation("remove", "/metadata/labels/"+pointerEscape(pipeline.LabelInstance), nil))
		resp.Warnings = append(resp.Warnings, warning)
	}
	return resp
}

// pointerEscape escapes a map key for a JSON pointer (RFC 6901).
func pointerEscape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// annotationPatch turns the request's annotations (current) into ones that
// hold exactly stamp of the requester annotations, leaving the others.
func annotationPatch(current, stamp map[string]string) []jsonpatch.JsonPatchOperation {
	if current == nil {
		if len(stamp) == 0 {
			return nil
		}
		return []jsonpatch.JsonPatchOperation{jsonpatch.NewOperation("add", "/metadata/annotations", stamp)}
	}
	var ops []jsonpatch.JsonPatchOperation
	for _, k := range []string{v1alpha1.AnnotationRequester, v1alpha1.AnnotationRequesterSeal} {
		path := "/metadata/annotations/" + pointerEscape(k)
		want, keep := stamp[k]
		have, present := current[k]
		switch {
		case keep && (!present || have != want):
			ops = append(ops, jsonpatch.NewOperation("add", path, want))
		case !keep && present:
			ops = append(ops, jsonpatch.NewOperation("remove", path, nil))
		}
	}
	return ops
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
