// Package render is `worker claim`: clone the template repository, write a
// generated overlay from the Claim's values, exposure and profile, render
// it in-process with kustomize in a sandbox, pack the manifests as a
// reproducible tar+gzip and push it as one OCI artifact that Flux and
// Argo CD deploy.
//
// The steps live in subpackages: source (clone), overlay (kustomization
// from Go types), guard and build (sandboxed krusty), postrender (pod
// template settings), archive (reproducible tarball) and publish (OCI).
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/kustomize/api/resmap"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render/archive"
	"github.com/packline/packline/jobs/render/internal/build"
	"github.com/packline/packline/jobs/render/internal/overlay"
	"github.com/packline/packline/jobs/render/internal/postrender"
	"github.com/packline/packline/jobs/render/source"
)

// DefaultMaxOutputBytes bounds the rendered YAML. A workload's manifests
// are kilobytes; a template that renders megabytes is broken or hostile,
// and the artifact would be pulled by every cluster that deploys it.
const DefaultMaxOutputBytes = 4 << 20

// Limits bound a render.
type Limits struct {
	// MaxOutputBytes bounds the rendered YAML; zero means the default.
	MaxOutputBytes int
	// Build bounds krusty's run (objects, bytes and time, checked before
	// and while it runs); zero fields take build's defaults.
	Build build.Limits
}

// Manifests renders c from snap and returns one file per object.
func Manifests(c workerv1.Claim, snap *source.Snapshot, l Limits) ([]archive.File, error) {
	_, files, err := manifests(c, snap, l)
	return files, err
}

// manifests is Manifests that also returns the rendered objects.
func manifests(c workerv1.Claim, snap *source.Snapshot, l Limits) (resmap.ResMap, []archive.File, error) {
	values, err := decodeValues(c.Values)
	if err != nil {
		return nil, nil, err
	}
	ov, err := overlay.Build(overlay.Input{
		Namespace: c.Namespace,
		Template:  c.Template,
		Values:    values,
		Exposure:  c.Exposure,
		Profile:   c.Profile,
		RepoDir:   build.RepoFromOverlay,
	})
	if err != nil {
		return nil, nil, err
	}
	m, err := build.RunLimited(snap, ov, l.Build)
	if err != nil {
		return nil, nil, err
	}
	if err := postrender.Bindings(m, c.Template.Parameters, values); err != nil {
		return nil, nil, err
	}
	if err := postrender.Profile(m, c.Profile); err != nil {
		return nil, nil, err
	}
	if err := postrender.InitPulls(m, c.Template.Parameters, values, c.InitPull, c.Profile); err != nil {
		return nil, nil, err
	}
	if err := checkKinds(m, c.Template.Kinds); err != nil {
		return nil, nil, err
	}
	max := l.MaxOutputBytes
	if max == 0 {
		max = DefaultMaxOutputBytes
	}
	out, err := files(m, max)
	return m, out, err
}

// kindsOf lists the distinct kinds of m as "Kind" or "Kind.group", sorted.
func kindsOf(m resmap.ResMap) []string {
	seen := map[string]bool{}
	for _, r := range m.Resources() {
		seen[v1alpha1.RenderedKind{Group: r.GetGvk().Group, Kind: r.GetKind()}.String()] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// files names each object "<kind>[.<group>]_<name>.yaml", lower case, so
// that entries sort by kind and a reviewer finds an object by its name.
func files(m resmap.ResMap, max int) ([]archive.File, error) {
	var out []archive.File
	total := 0
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, failure.Permanent(workerv1.ReasonRenderFailed, fmt.Errorf("encoding %s/%s: %w", r.GetKind(), r.GetName(), err))
		}
		total += len(b)
		if total > max {
			return nil, failure.Permanent(workerv1.ReasonRenderFailed,
				fmt.Errorf("rendered manifests exceed the %d-byte limit", max))
		}
		kind := strings.ToLower(r.GetKind())
		if g := r.GetGvk().Group; g != "" {
			kind += "." + g
		}
		out = append(out, archive.File{Name: kind + "_" + r.GetName() + ".yaml", Data: b})
	}
	if len(out) == 0 {
		return nil, failure.Permanent(workerv1.ReasonRenderFailed, fmt.Errorf("the template rendered no objects"))
	}
	return out, nil
}

// decodeValues keeps numbers as json.Number, so an integer never passes
// through float64 and "3" stays 3 in the output.
func decodeValues(v *apiextensionsv1.JSON) (map[string]any, error) {
	out := map[string]any{}
	if v == nil || len(bytes.TrimSpace(v.Raw)) == 0 || string(bytes.TrimSpace(v.Raw)) == "null" {
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(v.Raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("values must be a JSON object: %w", err))
	}
	return out, nil
}

// cloneDir is where the template is cloned inside the workspace.
func cloneDir(workDir string) string { return filepath.Join(workDir, "template") }
