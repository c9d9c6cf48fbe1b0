// Package postrender edits the rendered objects for the settings that live
// inside pod templates: container bindings by container name, and the
// EnvironmentProfile's runtime class, pull secrets, node selector,
// tolerations and image registry rewrites.
//
// Why after rendering rather than as kustomize patches: a pod template sits
// at a different path in each workload kind (Pod, Deployment, CronJob...),
// JSON6902 addresses containers by index where the template names them,
// and a registry rewrite must see the final image, including one a binding
// just set. Here every workload is seen in its final form, and the edits
// are typed operations on kustomize's own YAML nodes.
package postrender

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/kustomize/api/resource"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// podSpecPaths are where each workload kind keeps its pod spec.
var podSpecPaths = map[string][]string{
	"Pod":                   {"spec"},
	"Deployment":            {"spec", "template", "spec"},
	"StatefulSet":           {"spec", "template", "spec"},
	"DaemonSet":             {"spec", "template", "spec"},
	"ReplicaSet":            {"spec", "template", "spec"},
	"ReplicationController": {"spec", "template", "spec"},
	"Job":                   {"spec", "template", "spec"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template", "spec"},
}

// podSpec returns the pod spec of a workload, or nil for other objects.
func podSpec(r *resource.Resource) (*kyaml.RNode, error) {
	p, ok := podSpecPaths[r.GetKind()]
	if !ok {
		return nil, nil
	}
	return r.Pipe(kyaml.Lookup(p...))
}

// containerLists are the pod spec fields holding containers.
var containerLists = []string{"initContainers", "containers", "ephemeralContainers"}

// elements are the items of n's list field; none when n has no such list.
func elements(n *kyaml.RNode, field string) ([]*kyaml.RNode, error) {
	list, err := n.Pipe(kyaml.Lookup(field))
	if err != nil || list == nil {
		return nil, nil
	}
	return list.Elements()
}

// eachContainer calls f on every container of the pod spec, init and
// ephemeral ones included.
func eachContainer(spec *kyaml.RNode, f func(c *kyaml.RNode) error) error {
	for _, list := range containerLists {
		items, err := elements(spec, list)
		if err != nil {
			return err
		}
		for _, c := range items {
			if err := f(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// toNode turns a JSON value into a YAML node.
func toNode(v any) (*kyaml.RNode, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return nil, err
	}
	return kyaml.Parse(string(y))
}

func setField(n *kyaml.RNode, field string, v any) error {
	val, err := toNode(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", field, err)
	}
	return n.PipeE(kyaml.SetField(field, val))
}
