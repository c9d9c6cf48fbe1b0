// Package overlay writes the generated Kustomize overlay of a Claim: the
// template path as a resource, the template's components and the chosen
// exposure's component, JSON6902 patches from the exposure, the parameter
// bindings that are plain JSON pointers and the profile, generators from
// values, labels and the namespace.
//
// The overlay is built from kustomize's own Go types and marshalled, never
// from text templates, so a value can never inject Kustomize syntax.
//
// Settings that depend on where a pod template sits in an object (container
// image, resources and env by container name; runtimeClassName,
// imagePullSecrets, nodeSelector, tolerations and registry rewrites) are
// applied after rendering by package postrender, which sees the final
// objects; see there for why.
package overlay

import (
	"encoding/json"
	"fmt"
	"path"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render/internal/guard"
)

// Input is what the overlay is made from.
type Input struct {
	Namespace string
	Template  v1alpha1.ClaimTemplateSpec
	Values    map[string]any
	Exposure  v1alpha1.Exposure
	Profile   *v1alpha1.EnvironmentProfileSpec
	// RepoDir is the template repository's root as seen from the overlay
	// directory, for example "../repo".
	RepoDir string
}

// Overlay is the generated kustomization and the files it refers to, by
// path relative to the overlay directory.
type Overlay struct {
	Kustomization types.Kustomization
	Files         map[string][]byte
}

// Build makes the overlay. Its errors are permanent: they come from the
// template or the claim, and a retry would meet them again.
func Build(in Input) (*Overlay, error) {
	o := &Overlay{Files: map[string][]byte{}}
	k := &o.Kustomization
	k.APIVersion = types.KustomizationVersion
	k.Kind = types.KustomizationKind
	k.Namespace = in.Namespace

	base, err := repoPath(in.RepoDir, in.Template.Source.Path, "source.path")
	if err != nil {
		return nil, err
	}
	k.Resources = []string{base}
	for i, c := range in.Template.Components {
		p, err := repoPath(in.RepoDir, c, fmt.Sprintf("components[%d]", i))
		if err != nil {
			return nil, err
		}
		k.Components = append(k.Components, p)
	}
	if err := exposure(k, in); err != nil {
		return nil, err
	}
	if err := bindings(k, in.Template.Parameters, in.Values); err != nil {
		return nil, err
	}
	if err := generators(o, in.Template.Generators, in.Values); err != nil {
		return nil, err
	}
	if err := profile(k, in.Profile); err != nil {
		return nil, err
	}
	return o, nil
}

// YAML is the kustomization.yaml of the overlay.
func (o *Overlay) YAML() ([]byte, error) {
	return yaml.Marshal(o.Kustomization)
}

// repoPath turns a repository-relative path from the template into a path
// relative to the overlay, refusing anything that is not a plain relative
// path inside the repository (absolute, "..", or a URL).
func repoPath(repoDir, p, field string) (string, error) {
	if p == "" {
		return "", invalid("%s is empty", field)
	}
	if guard.IsRemote(p) {
		return "", failure.Permanent(workerv1.ReasonTemplateRejected,
			fmt.Errorf("%s %q is a URL: remote bases are not allowed, the template must live in its repository", field, p))
	}
	if path.IsAbs(p) {
		return "", invalid("%s %q must be relative to the repository root", field, p)
	}
	clean := path.Clean(p)
	if clean == ".." || len(clean) > 2 && clean[:3] == "../" {
		return "", failure.Permanent(workerv1.ReasonTemplateRejected,
			fmt.Errorf("%s %q escapes the repository", field, p))
	}
	return path.Join(repoDir, clean), nil
}

func invalid(format string, a ...any) error {
	return failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf(format, a...))
}

// jsonPatch is one RFC 6902 operation.
type jsonPatch struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// addPatch appends a JSON6902 patch that sets each of ops on the objects
// matching target. "add" replaces an existing member, so it works whether
// or not the template already sets the field.
func addPatch(k *types.Kustomization, target types.Selector, ops ...jsonPatch) error {
	b, err := json.Marshal(ops)
	if err != nil {
		return invalid("encoding patch: %v", err)
	}
	t := target
	k.Patches = append(k.Patches, types.Patch{Patch: string(b), Target: &t})
	return nil
}

func selector(kind, name string) types.Selector {
	var s types.Selector
	s.Kind = kind
	s.Name = name
	return s
}
