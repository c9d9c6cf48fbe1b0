// Package manifests renders a kustomization in-process (as `kubectl apply -k`
// would) into unstructured objects, for the tests that check config/default
// and the sandbox test that installs it.
package manifests

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Render builds the kustomization in dir.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, res := range resMap.Resources() {
		// Through YAML rather than res.Map(): kyaml's maps hold int, which
		// unstructured's JSON-only deep copy rejects.
		b, err := res.AsYAML()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}
