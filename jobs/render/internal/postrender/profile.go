package postrender

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/resmap"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/packline/packline/api/v1alpha1"
)

// Profile applies the pod-level settings of p to every workload in m.
// The profile wins over the template: it is the platform's word on where
// and how pods run.
func Profile(m resmap.ResMap, p *v1alpha1.EnvironmentProfileSpec) error {
	if p == nil {
		return nil
	}
	for _, r := range m.Resources() {
		if r.GetKind() == "StatefulSet" && p.StorageClassName != "" {
			// Claim templates become PVCs at run time; the overlay's patch
			// only reaches PVC objects.
			if err := claimTemplates(r.Pipe, p.StorageClassName); err != nil {
				return fmt.Errorf("applying profile to StatefulSet/%s: %w", r.GetName(), err)
			}
		}
		spec, err := podSpec(r)
		if err != nil {
			return err
		}
		if spec == nil {
			continue
		}
		where := r.GetKind() + "/" + r.GetName()
		if err := profilePod(spec, p); err != nil {
			return fmt.Errorf("applying profile to %s: %w", where, err)
		}
	}
	return nil
}

func profilePod(spec *kyaml.RNode, p *v1alpha1.EnvironmentProfileSpec) error {
	if p.RuntimeClassName != "" {
		if err := setField(spec, "runtimeClassName", p.RuntimeClassName); err != nil {
			return err
		}
	}
	if len(p.NodeSelector) > 0 {
		sel, err := spec.Pipe(kyaml.LookupCreate(kyaml.MappingNode, "nodeSelector"))
		if err != nil {
			return err
		}
		for _, k := range sortedKeys(p.NodeSelector) {
			if err := sel.PipeE(kyaml.SetField(k, kyaml.NewStringRNode(p.NodeSelector[k]))); err != nil {
				return err
			}
		}
	}
	for _, s := range p.ImagePullSecrets {
		if err := appendUnique(spec, "imagePullSecrets", s, func(e *kyaml.RNode) bool {
			return kyaml.GetValue(e.Field("name").Value) == s.Name
		}); err != nil {
			return err
		}
	}
	for _, t := range p.Tolerations {
		if err := appendUnique(spec, "tolerations", t, func(e *kyaml.RNode) bool {
			var have corev1.Toleration
			return e.YNode().Decode(&have) == nil && reflect.DeepEqual(have, t)
		}); err != nil {
			return err
		}
	}
	if len(p.RegistryRewrites) > 0 {
		// Image volumes are pulled by the node as container images are:
		// the platform's "only through the mirror" holds for them too.
		if err := rewriteImageVolumes(spec, p.RegistryRewrites); err != nil {
			return err
		}
		return eachContainer(spec, func(c *kyaml.RNode) error {
			img := kyaml.GetValue(c.Field("image").Value)
			if out := Rewrite(img, p.RegistryRewrites); img != "" && out != img {
				return setField(c, "image", out)
			}
			return nil
		})
	}
	return nil
}

// rewriteImageVolumes applies the registry rewrites to every
// volumes[].image.reference of the pod spec.
func rewriteImageVolumes(spec *kyaml.RNode, rewrites []v1alpha1.RegistryRewrite) error {
	vols, err := elements(spec, "volumes")
	if err != nil {
		return err
	}
	for _, v := range vols {
		img, err := v.Pipe(kyaml.Lookup("image"))
		if err != nil || img == nil {
			continue
		}
		ref := kyaml.GetValue(img.Field("reference").Value)
		if ref == "" {
			continue
		}
		if out := Rewrite(ref, rewrites); out != ref {
			if err := setField(img, "reference", out); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendUnique appends v to the list field unless an element already
// matches, so a template that already carries the setting is not doubled.
func appendUnique(spec *kyaml.RNode, field string, v any, same func(*kyaml.RNode) bool) error {
	list, err := spec.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, field))
	if err != nil {
		return err
	}
	items, err := list.Elements()
	if err != nil {
		return err
	}
	for _, e := range items {
		if same(e) {
			return nil
		}
	}
	n, err := toNode(v)
	if err != nil {
		return err
	}
	return list.PipeE(kyaml.Append(n.YNode()))
}

// Rewrite applies the first matching registry rewrite to image. A prefix
// matches whole path segments only ("docker.io" does not match
// "docker.io2/x"), and an image without a registry host is matched as the
// Docker Hub name it stands for ("nginx" is docker.io/library/nginx).
func Rewrite(image string, rewrites []v1alpha1.RegistryRewrite) string {
	full := canonical(image)
	for _, rw := range rewrites {
		from := strings.TrimSuffix(rw.From, "/")
		for _, candidate := range []string{image, full} {
			if strings.HasPrefix(candidate, from+"/") {
				return strings.TrimSuffix(rw.To, "/") + candidate[len(from):]
			}
		}
	}
	return image
}

// canonical spells out Docker Hub's implicit host and library namespace.
func canonical(image string) string {
	first, rest, found := strings.Cut(image, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return image
	}
	if !found {
		return "docker.io/library/" + image
	}
	return "docker.io/" + first + "/" + rest
}

func sortedKeys(m map[string]string) []string {
	// Sorted, so the output is byte-identical between runs.
	return slices.Sorted(maps.Keys(m))
}

// claimTemplates sets the storage class of a StatefulSet's volumeClaimTemplates.
func claimTemplates(pipe func(...kyaml.Filter) (*kyaml.RNode, error), class string) error {
	list, err := pipe(kyaml.Lookup("spec", "volumeClaimTemplates"))
	if err != nil || list == nil {
		return err
	}
	items, err := list.Elements()
	if err != nil {
		return err
	}
	for _, pvc := range items {
		spec, err := pvc.Pipe(kyaml.LookupCreate(kyaml.MappingNode, "spec"))
		if err != nil {
			return err
		}
		if err := setField(spec, "storageClassName", class); err != nil {
			return err
		}
	}
	return nil
}
