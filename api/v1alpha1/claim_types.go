package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TemplateReference names a ClaimTemplate.
type TemplateReference struct {
	// name of the cluster-scoped ClaimTemplate.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Exposure is how the claimed workload is reached.
// +kubebuilder:validation:XValidation:rule="!has(self.nodePort) || self.type == 'NodePort'",message="nodePort is allowed only with type NodePort",fieldPath=".nodePort"
// +kubebuilder:validation:XValidation:rule="self.type != 'Ingress' || (has(self.host) && self.host.size() > 0)",message="host is required with type Ingress",fieldPath=".host"
// +kubebuilder:validation:XValidation:rule="!has(self.host) || self.type == 'Ingress'",message="host is allowed only with type Ingress",fieldPath=".host"
type Exposure struct {
	// type is ClusterIP (the default), NodePort, LoadBalancer or Ingress.
	// +optional
	// +kubebuilder:default=ClusterIP
	Type ExposureType `json:"type,omitempty"`

	// nodePort pins the node port (30000-32767); only with type NodePort.
	// Without it, Kubernetes allocates one.
	// +optional
	// +kubebuilder:validation:Minimum=30000
	// +kubebuilder:validation:Maximum=32767
	NodePort *int32 `json:"nodePort,omitempty"`

	// host is the Ingress host name; only with type Ingress.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Host string `json:"host,omitempty"`
}

// ClaimSpec is a request for a workload rendered from a ClaimTemplate.
// +kubebuilder:validation:XValidation:rule="has(self.workspace) == has(oldSelf.workspace)",message="workspace is immutable: it cannot be added or removed after creation",fieldPath=".workspace"
type ClaimSpec struct {
	// templateRef names the ClaimTemplate. It is immutable: claim another
	// template with a new Claim.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="templateRef is immutable"
	TemplateRef TemplateReference `json:"templateRef"`

	// values are checked against the template's valuesSchema and bound into
	// the rendered objects by its parameters. They are not confidential: they
	// are written into the pushed manifests. Never put credentials here.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Values *apiextensionsv1.JSON `json:"values,omitempty"`

	// exposure is how the workload is reached.
	// +optional
	// +kubebuilder:default={type: ClusterIP}
	Exposure Exposure `json:"exposure,omitempty"`

	// target overrides where the rendered manifests are pushed; by default
	// "<template repositoryPrefix>/<namespace>/<name>".
	// +optional
	Target *Target `json:"target,omitempty"`

	// delivery deploys the pushed manifests; by default the namespace's
	// EnvironmentProfile decides (and without one, nothing is delivered).
	// +optional
	Delivery *Delivery `json:"delivery,omitempty"`

	PipelineSpec `json:",inline"`
}

// Claim renders a workload from a ClaimTemplate with the user's values and the
// platform's EnvironmentProfile, and pushes the manifests as one OCI artifact
// that Flux and Argo CD can deploy.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=clm,categories=packline
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.templateRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.progress.step`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.status.digest`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Delivered",type=string,JSONPath=`.status.conditions[?(@.type=="Delivered")].status`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.delivery.lastAppliedRevision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters so that derived object names and labels stay valid"
type Claim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the claim.
	Spec ClaimSpec `json:"spec"`
	// status is the observed state of the render pipeline and delivery.
	// +optional
	Status ClaimStatus `json:"status,omitempty"`
}

// ClaimList is a list of Claims.
// +kubebuilder:object:root=true
type ClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Claim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Claim{}, &ClaimList{})
}
