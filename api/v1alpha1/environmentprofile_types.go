package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegistryRewrite replaces an image registry prefix.
type RegistryRewrite struct {
	// from is the prefix to replace, for example "docker.io".
	// +kubebuilder:validation:MinLength=1
	From string `json:"from"`
	// to is the replacement, for example "mirror.example.com/dockerhub".
	// +kubebuilder:validation:MinLength=1
	To string `json:"to"`
}

// EnvironmentProfileSpec is an environment overlay chosen by the platform.
type EnvironmentProfileSpec struct {
	// namespaceSelector picks the namespaces whose Claims get this profile.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn'] && has(e.values) && size(e.values) > 0) || (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="matchExpressions: operator must be In or NotIn with values, or Exists or DoesNotExist without values"
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// priority breaks ties when several profiles match: highest first, then name.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Priority int32 `json:"priority,omitempty"`

	// storageClassName is set on rendered PVCs and on the workspace PVC.
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`

	// workspaceSize is the default workspace size for Claims and Artifacts in matching namespaces.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="workspaceSize must be positive"
	WorkspaceSize *resource.Quantity `json:"workspaceSize,omitempty"`

	// ingressClassName is set on rendered Ingresses.
	// +optional
	IngressClassName string `json:"ingressClassName,omitempty"`

	// runtimeClassName is set on rendered pod templates (for example a GPU runtime).
	// +optional
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// registryRewrites rewrite image registry prefixes in rendered pod templates.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	RegistryRewrites []RegistryRewrite `json:"registryRewrites,omitempty"`

	// imagePullSecrets are added to rendered pod templates.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// nodeSelector is merged into rendered pod templates.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations are added to rendered pod templates.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])",message="toleration operator must be Exists or Equal"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.effect) || t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="toleration effect must be NoSchedule, PreferNoSchedule or NoExecute"
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value.size() == 0)",message="a toleration with operator Exists must not have a value"
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// workerResources are the requests and limits of the render Jobs of
	// Claims in matching namespaces, per resource name over the manager's
	// defaults; a Claim's spec.resources overrides them.
	// +optional
	WorkerResources *corev1.ResourceRequirements `json:"workerResources,omitempty"`

	// labels are added to every rendered object.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// delivery is the default for Claims that set no spec.delivery.
	// +optional
	Delivery *ProfileDelivery `json:"delivery,omitempty"`
	// signing signs every Claim pushed in matching namespaces with this
	// key, which the Claims cannot override. The key Secret is in the
	// manager's template namespace, so that no tenant can read it: these
	// Claims render there, like those of private templates, and push only
	// to their template's repositoryPrefix with its pushSecretRef.
	// +optional
	Signing *SigningSpec `json:"signing,omitempty"`
}

// EnvironmentProfile is the environment overlay for Claims in the namespaces
// it selects. The platform picks it; the user never does.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=envp,categories=packline
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="StorageClass",type=string,JSONPath=`.spec.storageClassName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EnvironmentProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the profile.
	Spec EnvironmentProfileSpec `json:"spec"`
	// status says whether the profile is usable.
	// +optional
	Status EnvironmentProfileStatus `json:"status,omitempty"`
}

// EnvironmentProfileStatus is the observed state of an EnvironmentProfile.
type EnvironmentProfileStatus struct {
	// observedGeneration is the generation last validated.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready says whether the profile is usable; a profile that
	// is not is skipped when Claims pick their profile.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EnvironmentProfileList is a list of EnvironmentProfiles.
// +kubebuilder:object:root=true
type EnvironmentProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EnvironmentProfile `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EnvironmentProfile{}, &EnvironmentProfileList{})
}
