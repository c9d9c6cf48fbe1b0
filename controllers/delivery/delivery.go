// Package delivery turns a Claim's pushed digest into the two Flux objects
// that deploy it, and reads back what Flux applied. Plan and the builders
// are pure, so each rule is a table test; the reconcile step that creates
// the objects lives with the Claim controller.
package delivery

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/packline/packline/api/v1alpha1"
)

// Reasons a delivered Claim reports.
const (
	// ReasonServiceAccountRequired: the profile requires a tenant identity
	// for Flux and neither it nor the Claim names one.
	ReasonServiceAccountRequired = "ServiceAccountRequired"
	// ReasonDigestUnrecorded: status.digest changed to one the manager did
	// not record (status.pushSeal does not verify), so Flux is not
	// re-pointed: status is writable by whoever holds claims/status.
	ReasonDigestUnrecorded = "DigestUnrecorded"
	// ReasonFluxNotInstalled: the Flux CRDs are absent.
	ReasonFluxNotInstalled = "FluxNotInstalled"
	// ReasonDelivering: Flux has not applied the digest yet.
	ReasonDelivering = "Delivering"
	// ReasonRevisionMismatch: Flux applied another revision than the digest.
	ReasonRevisionMismatch = "RevisionMismatch"
	// ReasonServiceAccountPinned: the profile pins the ServiceAccount Flux
	// applies as, and the Claim names another.
	ReasonServiceAccountPinned = "ServiceAccountPinned"
	// ReasonDeliveryConflict: an OCIRepository or Kustomization of the
	// Claim's name exists and is not controlled by the Claim; packline never
	// adopts one.
	ReasonDeliveryConflict = "DeliveryConflict"
	// ReasonDeliveryRejected: the API server refused a Flux object (Flux's
	// CRD validation, an admission policy).
	ReasonDeliveryRejected = "DeliveryRejected"
	// ReasonVerificationFailed: Flux cannot verify the pushed digest with
	// the key the Claim or its profile names.
	ReasonVerificationFailed = "VerificationFailed"
)

// Refusal is why Resolve refuses a Claim's delivery: Reason is its
// condition reason, and the message names the field.
type Refusal struct{ Reason, Message string }

func (e *Refusal) Error() string { return e.Message }

// Defaults of spec.delivery.flux.
const (
	DefaultServiceAccount = "default"
	DefaultTimeout        = 5 * time.Minute
	DefaultInterval       = 10 * time.Minute
)

// FluxCRDs are what delivery needs installed, named in FluxNotInstalled.
const FluxCRDs = "ocirepositories.source.toolkit.fluxcd.io and kustomizations.kustomize.toolkit.fluxcd.io"

// Plan is what the Flux objects of one Claim say.
type Plan struct {
	// Name of both objects and Namespace of the Claim.
	Name, Namespace string
	// Repository (no scheme) and Digest pin the OCIRepository.
	Repository, Digest string
	Insecure           bool
	// PullSecret and CASecret are the Claim's push and CA Secrets, which
	// the OCIRepository reads in the same namespace; empty for none.
	PullSecret, CASecret string
	// VerifySecret holds the cosign public key Flux verifies with; empty
	// leaves spec.verify unset. VerifyField is the field that asked for it,
	// named when Flux cannot verify.
	VerifySecret, VerifyField string
	ServiceAccount            string
	Prune, Wait               bool
	Timeout, Interval         time.Duration
}

// Resolve returns the effective Flux delivery of a Claim: its own, else its
// profile's, merged field by field over the profile's; nil when neither
// delivers. It refuses a Claim that names no ServiceAccount when the
// profile requires one. Without one, Flux applies as the namespace's
// "default" ServiceAccount, never as its own controller account.
func Resolve(c *v1alpha1.Claim, profile *v1alpha1.EnvironmentProfileSpec) (*v1alpha1.FluxDelivery, error) {
	var pd *v1alpha1.ProfileDelivery
	if profile != nil {
		pd = profile.Delivery
	}
	var own *v1alpha1.FluxDelivery
	if c.Spec.Delivery != nil {
		own = c.Spec.Delivery.Flux
	}
	if own == nil && (pd == nil || pd.Flux == nil) {
		return nil, nil
	}
	eff := &v1alpha1.FluxDelivery{}
	if pd != nil && pd.Flux != nil {
		eff = pd.Flux.DeepCopy()
	}
	if own != nil {
		if own.ServiceAccountName != "" {
			eff.ServiceAccountName = own.ServiceAccountName
		}
		if own.Prune != nil {
			eff.Prune = own.Prune
		}
		if own.Wait != nil {
			eff.Wait = own.Wait
		}
		if own.Timeout != nil {
			eff.Timeout = own.Timeout
		}
		if own.Interval != nil {
			eff.Interval = own.Interval
		}
		if own.VerifySecretRef != nil {
			eff.VerifySecretRef = own.VerifySecretRef.DeepCopy()
		}
	}
	if pd != nil && pd.PinServiceAccount && pd.Flux != nil {
		pinned := pd.Flux.ServiceAccountName
		if own != nil && own.ServiceAccountName != "" && own.ServiceAccountName != pinned {
			return nil, &Refusal{Reason: ReasonServiceAccountPinned, Message: fmt.Sprintf(
				"spec.delivery.flux.serviceAccountName: the EnvironmentProfile of namespace %s pins the ServiceAccount Flux applies as to %q; remove the field or set it to %q",
				c.Namespace, pinned, pinned)}
		}
		eff.ServiceAccountName = pinned
	}
	if eff.ServiceAccountName == "" && pd != nil && pd.RequireServiceAccount {
		return nil, &Refusal{Reason: ReasonServiceAccountRequired, Message: fmt.Sprintf(
			"spec.delivery.flux.serviceAccountName: the EnvironmentProfile of namespace %s requires the ServiceAccount Flux applies as; name one of this namespace", c.Namespace)}
	}
	return eff, nil
}

// ClaimServiceAccount is the ServiceAccount a Claim itself chose for Flux to
// apply as, which its requester must be allowed to impersonate: empty when
// the Claim is not delivered, names none, or names its profile's (an
// admin's choice for the namespace).
func ClaimServiceAccount(c *v1alpha1.Claim, profile *v1alpha1.EnvironmentProfileSpec) string {
	if c.Spec.Delivery == nil || c.Spec.Delivery.Flux == nil {
		return ""
	}
	own := c.Spec.Delivery.Flux.ServiceAccountName
	if profile != nil && profile.Delivery != nil && profile.Delivery.Flux != nil && profile.Delivery.Flux.ServiceAccountName == own {
		return ""
	}
	return own
}

// NewPlan is the plan for a Claim whose render pushed repository@digest.
func NewPlan(c *v1alpha1.Claim, d *v1alpha1.FluxDelivery, private bool) Plan {
	t := c.GetPushTarget()
	p := Plan{
		Name: c.Name, Namespace: c.Namespace,
		Repository: strings.TrimSuffix(c.Status.Reference, "@"+c.Status.Digest), Digest: c.Status.Digest,
		Insecure:       t.PlainHTTP,
		ServiceAccount: d.ServiceAccountName,
		Prune:          ptr.Deref(d.Prune, true), Wait: ptr.Deref(d.Wait, true),
		Timeout: DefaultTimeout, Interval: DefaultInterval,
	}
	// A private template's Claims push with the template's Secret, in the
	// template namespace, which a tenant's OCIRepository cannot read.
	if !private {
		if t.PushSecretRef != nil {
			p.PullSecret = t.PushSecretRef.Name
		}
		if t.CASecretRef != nil {
			p.CASecret = t.CASecretRef.Name
		}
	}
	if p.ServiceAccount == "" {
		p.ServiceAccount = DefaultServiceAccount
	}
	switch {
	case d.VerifySecretRef != nil:
		p.VerifySecret, p.VerifyField = d.VerifySecretRef.Name, "spec.delivery.flux.verifySecretRef"
		if c.Spec.Delivery == nil || c.Spec.Delivery.Flux == nil || c.Spec.Delivery.Flux.VerifySecretRef == nil {
			p.VerifyField = "the EnvironmentProfile's spec.delivery.flux.verifySecretRef"
		}
	case c.Spec.Signing != nil:
		p.VerifySecret, p.VerifyField = c.Spec.Signing.KeySecretRef.Name, "spec.signing.keySecretRef"
	}
	if d.Timeout != nil {
		p.Timeout = d.Timeout.Duration
	}
	if d.Interval != nil {
		p.Interval = d.Interval.Duration
	}
	return p
}

// OCIRepository pins the pushed digest: a tag could move under it.
func OCIRepository(p Plan) *sourcev1.OCIRepository {
	r := &sourcev1.OCIRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.OCIRepositoryKind},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
	}
	SetOCIRepositorySpec(r, p)
	return r
}

// SetOCIRepositorySpec writes the plan into an existing object's spec.
func SetOCIRepositorySpec(r *sourcev1.OCIRepository, p Plan) {
	r.Spec.URL = "oci://" + p.Repository
	r.Spec.Reference = &sourcev1.OCIRepositoryRef{Digest: p.Digest}
	r.Spec.Insecure = p.Insecure
	r.Spec.Interval = metav1.Duration{Duration: p.Interval}
	r.Spec.SecretRef, r.Spec.CertSecretRef = nil, nil
	if p.PullSecret != "" {
		r.Spec.SecretRef = &meta.LocalObjectReference{Name: p.PullSecret}
	}
	if p.CASecret != "" {
		r.Spec.CertSecretRef = &meta.LocalObjectReference{Name: p.CASecret}
	}
	r.Spec.Verify = nil
	if p.VerifySecret != "" {
		r.Spec.Verify = &sourcev1.OCIRepositoryVerification{Provider: "cosign", SecretRef: &meta.LocalObjectReference{Name: p.VerifySecret}}
	}
}

// Kustomization applies the artifact as the tenant's ServiceAccount, into
// the Claim's namespace.
func Kustomization(p Plan) *kustomizev1.Kustomization {
	k := &kustomizev1.Kustomization{
		TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
	}
	SetKustomizationSpec(k, p)
	return k
}

// SetKustomizationSpec writes the plan into an existing object's spec.
func SetKustomizationSpec(k *kustomizev1.Kustomization, p Plan) {
	k.Spec.SourceRef = kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: p.Name}
	k.Spec.Path = "./"
	k.Spec.TargetNamespace = p.Namespace
	k.Spec.ServiceAccountName = p.ServiceAccount
	k.Spec.Prune = p.Prune
	k.Spec.Wait = p.Wait
	k.Spec.Timeout = &metav1.Duration{Duration: p.Timeout}
	k.Spec.Interval = metav1.Duration{Duration: p.Interval}
}

// Observed is what Flux reports about a Claim's delivery.
type Observed struct {
	// Delivered mirrors the Kustomization's Ready: status, reason, message.
	Delivered metav1.Condition
	// Applied is the Kustomization's lastAppliedRevision.
	Applied string
	// Drifted is set when Flux applied a revision other than the digest.
	Drifted bool
	// Done: the digest is applied and healthy.
	Done bool
}

// Observe reads what Flux reports for a plan: the Kustomization (nil: not
// created yet) against the digest, and, while it is not applied, the
// OCIRepository (nil: none), whose failure is the cause a Kustomization
// only echoes ("source not found"). A failed signature check names the
// field that asked for it: the key Secret is missing, holds no matching
// key, or the digest is not signed.
func Observe(p Plan, repo *sourcev1.OCIRepository, k *kustomizev1.Kustomization) Observed {
	o := Observed{Delivered: metav1.Condition{Type: v1alpha1.ConditionDelivered, Status: metav1.ConditionUnknown,
		Reason: ReasonDelivering, Message: "waiting for Flux to apply " + p.Digest}}
	if k != nil {
		o.Applied = k.Status.LastAppliedRevision
		o.Drifted = o.Applied != "" && !strings.HasSuffix(o.Applied, p.Digest)
		if ready := currentReady(k.Status.Conditions, k.Generation); ready != nil {
			o.Delivered.Status, o.Delivered.Reason, o.Delivered.Message = ready.Status, ready.Reason, ready.Message
			o.Done = ready.Status == metav1.ConditionTrue && !o.Drifted && o.Applied != ""
		}
	}
	if o.Done || repo == nil {
		return o
	}
	ready := currentReady(repo.Status.Conditions, repo.Generation)
	if ready == nil || ready.Status != metav1.ConditionFalse {
		return o
	}
	o.Delivered.Status, o.Delivered.Reason = metav1.ConditionFalse, ready.Reason
	o.Delivered.Message = fmt.Sprintf("OCIRepository %s: %s", repo.Name, ready.Message)
	verified := apimeta.FindStatusCondition(repo.Status.Conditions, sourcev1.SourceVerifiedCondition)
	if repo.Spec.Verify != nil && (ready.Reason == sourcev1.VerificationError || verified != nil && verified.Status == metav1.ConditionFalse) {
		o.Delivered.Reason = ReasonVerificationFailed
		o.Delivered.Message = fmt.Sprintf("%s: Flux cannot verify %s with the cosign public key in Secret %q (the Secret is missing, holds no matching key, or the digest is not signed): %s",
			p.VerifyField, p.Digest, p.VerifySecret, ready.Message)
	}
	return o
}

// currentReady is a Flux object's Ready condition, when it is about the
// object's current spec.
func currentReady(conds []metav1.Condition, generation int64) *metav1.Condition {
	ready := apimeta.FindStatusCondition(conds, meta.ReadyCondition)
	if ready == nil || ready.ObservedGeneration != generation {
		return nil
	}
	return ready
}

// Failure is the reason and message of an API error of writing a Claim's
// Flux objects, when it stalls the delivery (until someone acts): a
// missing Flux kind (NoMatch, or NotFound for the resource, as when the CRD
// was deleted while the manager runs) is FluxNotInstalled; an object the
// API server refuses (Flux's CRD validation, an admission policy) is
// DeliveryRejected, naming the Claim fields behind the refused Flux
// fields. Any other error is retried (stall false).
func Failure(err error) (reason, msg string, stall bool) {
	switch {
	case apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return ReasonFluxNotInstalled, "Flux is not installed: this cluster does not serve " + FluxCRDs + " (" + err.Error() + "); install Flux or turn spec.delivery off", true
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
		var fields []string
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Details != nil {
			for _, cause := range status.Status().Details.Causes {
				if f := ClaimField(cause.Field); f != "" && !slices.Contains(fields, f) {
					fields = append(fields, f)
				}
			}
		}
		sort.Strings(fields)
		msg = "the API server refused the Flux objects of this Claim: " + err.Error()
		if len(fields) > 0 {
			msg = strings.Join(fields, ", ") + ": " + msg + " (set by the Claim or its EnvironmentProfile)"
		}
		return ReasonDeliveryRejected, msg, true
	}
	return "", "", false
}

// FluxFields maps the Flux fields packline writes to the Claim fields they
// come from, so a refusal of the API server names what the user sets.
var FluxFields = map[string]string{
	"spec.interval":           "spec.delivery.flux.interval",
	"spec.timeout":            "spec.delivery.flux.timeout",
	"spec.serviceAccountName": "spec.delivery.flux.serviceAccountName",
	"spec.verify":             "spec.delivery.flux.verifySecretRef",
	"spec.secretRef":          "spec.target.pushSecretRef",
	"spec.certSecretRef":      "spec.target.caSecretRef",
	"spec.url":                "spec.target",
}

// ClaimField is the Claim field behind a Flux field path the API server
// named ("spec.verify.secretRef.name" is spec.delivery.flux.verifySecretRef),
// or "" for one packline does not take from the Claim.
func ClaimField(fluxField string) string {
	for f := fluxField; f != ""; {
		if c, ok := FluxFields[f]; ok {
			return c
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return ""
}
