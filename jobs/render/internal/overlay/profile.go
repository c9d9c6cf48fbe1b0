package overlay

import (
	"maps"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/packline/packline/api/v1alpha1"
)

// profile applies the EnvironmentProfile settings that have one fixed place
// in the objects they change: the storage class of PVCs, the class of
// Ingresses, and labels on every object. Labels go on pod templates too, so
// that cost and policy tooling sees them on pods, but never on selectors,
// which are immutable on a Deployment.
func profile(k *types.Kustomization, p *v1alpha1.EnvironmentProfileSpec) error {
	if p == nil {
		return nil
	}
	if p.StorageClassName != "" {
		if err := addPatch(k, selector("PersistentVolumeClaim", ""),
			jsonPatch{Op: "add", Path: "/spec/storageClassName", Value: p.StorageClassName}); err != nil {
			return err
		}
	}
	if p.IngressClassName != "" {
		if err := addPatch(k, selector("Ingress", ""),
			jsonPatch{Op: "add", Path: "/spec/ingressClassName", Value: p.IngressClassName}); err != nil {
			return err
		}
	}
	if len(p.Labels) > 0 {
		k.Labels = append(k.Labels, types.Label{Pairs: maps.Clone(p.Labels), IncludeTemplates: true})
	}
	return nil
}
