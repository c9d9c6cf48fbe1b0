// Package v1alpha1 holds the packline.dev/v1alpha1 API: Artifact, Claim,
// ClaimTemplate and EnvironmentProfile.
// +kubebuilder:object:generate=true
// +groupName=packline.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every packline kind.
	GroupVersion = schema.GroupVersion{Group: "packline.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the packline kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the packline kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
