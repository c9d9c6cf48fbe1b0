// Package kitfile is the KitOps Kitfile: its types (restated from the
// published schema, https://kitops.org/docs/kitfile/format/ and the kit CLI's
// pkg/artifact/kitfile.go), generation from a folder following `kit init`'s
// conventions, merging with a user's Kitfile, and validation.
package kitfile

import (
	"fmt"
	"path"

	"sigs.k8s.io/yaml"

	"github.com/packline/packline/jobs/format"
)

// ManifestVersion is the Kitfile schema version kit writes.
const ManifestVersion = "1.0.0"

// Kitfile is the root of a Kitfile. Field names and JSON tags match kit's,
// because the ModelKit config blob is this struct as JSON and kit decodes it.
type Kitfile struct {
	ManifestVersion string    `json:"manifestVersion"`
	Package         Package   `json:"package,omitempty"`
	Model           *Model    `json:"model,omitempty"`
	Code            []Code    `json:"code,omitempty"`
	DataSets        []DataSet `json:"datasets,omitempty"`
	Docs            []Docs    `json:"docs,omitempty"`
}

type Package struct {
	Name        string   `json:"name,omitempty"`
	Version     string   `json:"version,omitempty"`
	Description string   `json:"description,omitempty"`
	License     string   `json:"license,omitempty"`
	Authors     []string `json:"authors,omitempty"`
}

type Model struct {
	Name        string      `json:"name,omitempty"`
	Path        string      `json:"path,omitempty"`
	License     string      `json:"license,omitempty"`
	Framework   string      `json:"framework,omitempty"`
	Format      string      `json:"format,omitempty"`
	Version     string      `json:"version,omitempty"`
	Description string      `json:"description,omitempty"`
	Parts       []ModelPart `json:"parts,omitempty"`
	Parameters  any         `json:"parameters,omitempty"`
	*LayerInfo
}

type ModelPart struct {
	Name    string `json:"name,omitempty"`
	Path    string `json:"path,omitempty"`
	License string `json:"license,omitempty"`
	Type    string `json:"type,omitempty"`
	*LayerInfo
}

type Code struct {
	Path        string `json:"path,omitempty"`
	Description string `json:"description,omitempty"`
	License     string `json:"license,omitempty"`
	*LayerInfo
}

type DataSet struct {
	Name        string `json:"name,omitempty"`
	Path        string `json:"path,omitempty"`
	Description string `json:"description,omitempty"`
	License     string `json:"license,omitempty"`
	Parameters  any    `json:"parameters,omitempty"`
	*LayerInfo
}

type Docs struct {
	Path        string `json:"path"`
	Description string `json:"description,omitempty"`
	*LayerInfo
}

// LayerInfo ties a Kitfile entry to its layer. kit compares Digest with the
// manifest's layer digest, and when it is set unpacks the layer's tar at the
// artifact root (the tar's names already carry the entry's path).
type LayerInfo struct {
	Digest string `json:"digest,omitempty"`
	DiffID string `json:"diffId,omitempty"`
}

// Parse decodes a Kitfile from YAML (or JSON), rejecting unknown fields so a
// typo fails the run instead of being ignored.
func Parse(b []byte) (*Kitfile, error) {
	var k Kitfile
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return nil, fmt.Errorf("parsing Kitfile: %w", err)
	}
	return &k, nil
}

// Paths lists every entry's path, cleaned: what each layer leaves out of
// the others (see pack.Walk).
func (k *Kitfile) Paths() []string {
	var out []string
	for _, e := range k.Entries() {
		out = append(out, path.Clean(e.Path))
	}
	return out
}

// Entry is one layer-producing item of a Kitfile.
type Entry struct {
	Kind format.Kind
	Path string
	// Info points into the Kitfile, so filling it records the layer there.
	Info **LayerInfo
}

// Entries lists the layer-producing items in layer order: model, parts,
// code, datasets, docs. kit matches layers to entries by order within each
// kind, so this order is part of the format.
func (k *Kitfile) Entries() []Entry {
	var out []Entry
	if m := k.Model; m != nil {
		if m.Path != "" {
			out = append(out, Entry{format.Model, m.Path, &m.LayerInfo})
		}
		for i := range m.Parts {
			out = append(out, Entry{format.ModelPart, m.Parts[i].Path, &m.Parts[i].LayerInfo})
		}
	}
	for i := range k.Code {
		out = append(out, Entry{format.Code, k.Code[i].Path, &k.Code[i].LayerInfo})
	}
	for i := range k.DataSets {
		out = append(out, Entry{format.Dataset, k.DataSets[i].Path, &k.DataSets[i].LayerInfo})
	}
	for i := range k.Docs {
		out = append(out, Entry{format.Docs, k.Docs[i].Path, &k.Docs[i].LayerInfo})
	}
	return out
}
