package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Delivery is how a Claim's pushed manifests reach the cluster.
type Delivery struct {
	// flux makes the manager keep a Flux OCIRepository, pinned to the pushed
	// digest, and a Kustomization applying it, in the Claim's namespace and
	// owned by the Claim.
	// +optional
	Flux *FluxDelivery `json:"flux,omitempty"`
}

// FluxDelivery configures the Flux objects of a delivered Claim.
type FluxDelivery struct {
	// serviceAccountName is the ServiceAccount, in the Claim's namespace,
	// that kustomize-controller impersonates to apply the manifests, so they
	// are applied with the tenant's rights, never with Flux's own. A Claim's
	// value overrides its profile's (unless the profile pins it); naming
	// one other than the profile's needs the requester's "impersonate" right
	// on serviceaccounts/<name> in the namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// prune deletes objects that a new digest no longer renders, and
	// everything applied when the Claim is deleted. Default true.
	// +optional
	Prune *bool `json:"prune,omitempty"`

	// wait makes Ready wait for the applied objects to be healthy (Flux's
	// spec.wait). Default true.
	// +optional
	Wait *bool `json:"wait,omitempty"`

	// timeout of one apply (and health wait), at least 1ms. Default 5m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1ms')",message="timeout must be a duration of at least 1ms, such as 5m or 1h30m: Flux refuses zero, negative and sub-millisecond timeouts"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// interval between Flux reconciles of the objects, at least 1ms.
	// Default 10m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1ms')",message="interval must be a duration of at least 1ms, such as 10m or 1h30m: Flux refuses zero, negative and sub-millisecond intervals"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// verifySecretRef names a Secret of the Claim's namespace holding the
	// cosign public key(s) ("*.pub") Flux verifies the signature with
	// (OCIRepository spec.verify, provider cosign). By default, a Claim
	// signed with its own spec.signing key is verified with that Secret's
	// "cosign.pub" (what cosign generate-key-pair k8s://... writes); a Claim
	// signed by its profile's key needs this field to be verified.
	// +optional
	VerifySecretRef *corev1.LocalObjectReference `json:"verifySecretRef,omitempty"`
}

// ProfileDelivery is an EnvironmentProfile's delivery default.
// +kubebuilder:validation:XValidation:rule="!has(self.pinServiceAccount) || !self.pinServiceAccount || (has(self.flux) && has(self.flux.serviceAccountName))",message="pinServiceAccount needs flux.serviceAccountName: the ServiceAccount every Claim of the matching namespaces delivers as"
type ProfileDelivery struct {
	// flux turns Flux delivery on for Claims of matching namespaces that do
	// not set spec.delivery; its fields are their defaults.
	// +optional
	Flux *FluxDelivery `json:"flux,omitempty"`

	// requireServiceAccount refuses to deliver a Claim whose Flux delivery
	// names no serviceAccountName (neither here nor on the Claim).
	// +optional
	RequireServiceAccount bool `json:"requireServiceAccount,omitempty"`

	// pinServiceAccount makes flux.serviceAccountName the only identity
	// Claims of matching namespaces deliver as: a Claim that names another
	// ServiceAccount is refused (ServiceAccountPinned). Without it, a Claim
	// may name its own, which its requester must be allowed to impersonate.
	// +optional
	PinServiceAccount bool `json:"pinServiceAccount,omitempty"`
}

// DeliveryStatus is what Flux reported about a delivered Claim.
type DeliveryStatus struct {
	// ociRepository and kustomization name the Flux objects, in the Claim's namespace.
	// +optional
	OCIRepository string `json:"ociRepository,omitempty"`
	// +optional
	Kustomization string `json:"kustomization,omitempty"`
	// lastAppliedRevision is the revision Flux last applied.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
}

// ClaimStatus is the observed state of a Claim: its render pipeline and,
// when delivered, what Flux applied.
type ClaimStatus struct {
	PipelineStatus `json:",inline"`

	// delivery is set when spec.delivery (or the profile) delivers the Claim.
	// +optional
	Delivery *DeliveryStatus `json:"delivery,omitempty"`
}

// Conditions and reasons of delivered Claims.
const (
	// ConditionDelivered mirrors the Flux Kustomization's Ready.
	ConditionDelivered = "Delivered"
	// ConditionDrifted: Flux applied a revision that is not the Claim's digest.
	ConditionDrifted = "Drifted"
	// ConditionVerified: the last periodic check (spec.verifyInterval)
	// found the tag still on the pushed digest (True), or TagMoved or
	// ArtifactMissing (False).
	ConditionVerified = "Verified"
)
