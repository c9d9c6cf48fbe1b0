package push

import (
	"encoding/json"
	"errors"
	"path"
	"slices"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/kitfile"
)

// layerPlan is one layer to write: its media type, its tar entries, and
// where its digest is recorded.
type layerPlan struct {
	kind        format.Kind
	path        string
	mediaType   string
	items       []pack.Item
	annotations map[string]string
	// info is the Kitfile entry's layer info (ModelKit only).
	info **kitfile.LayerInfo
}

// planLayers lists the layers of kf in manifest order.
//
// A ModelKit has one layer per Kitfile entry, as kit writes it, and no
// layer annotations (kit writes none).
//
// A ModelPack follows model-spec: every file of the model and its parts is
// a layer of its own, "weight" for weights (safetensors, gguf, bin, pt,
// onnx, … — kit init's list) and "weight.config" for the rest (config,
// tokenizer); code, datasets and docs keep their type, one layer per entry.
// Each layer names its path and its file's metadata, and says
// "untested" when its type is our guess: the entry was generated rather
// than named by the user, or the file's name matched no known kind.
func planLayers(root string, kf *kitfile.Kitfile, o Options) ([]layerPlan, error) {
	paths := kf.Paths()
	var out []layerPlan
	for _, e := range kf.Entries() {
		items, err := pack.Walk(root, e.Path, paths)
		if err != nil {
			return nil, err
		}
		if o.Format != v1alpha1.FormatModelPack {
			out = append(out, layerPlan{
				kind: e.Kind, path: e.Path, items: items, info: e.Info,
				mediaType: format.LayerMediaType(o.Format, e.Kind, o.Compression),
			})
			continue
		}
		stated := o.Stated != nil && o.Stated(e.Path)
		if k, ok := format.PackKindOf(e.Kind); ok {
			out = append(out, packLayer(k, e.Path, items, !stated, o.Compression))
			continue
		}
		for _, it := range items {
			if it.Dir {
				continue // folders come with each file's own layer
			}
			fileItems, err := pack.Walk(root, it.Name, nil)
			if err != nil {
				return nil, err
			}
			base := path.Base(it.Name)
			k, known := format.WeightConfig, kitfile.IsMetadata(base)
			if kitfile.IsWeight(base) {
				k, known = format.Weight, true
			}
			out = append(out, packLayer(k, it.Name, fileItems, !stated || !known, o.Compression))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("pack: the Kitfile's paths hold no files")
	}
	return out, nil
}

func packLayer(k format.Kind, p string, items []pack.Item, untested bool, c v1alpha1.Compression) layerPlan {
	p = path.Clean(p)
	a := map[string]string{format.AnnotationFilepath: p}
	if meta, ok := fileMetadata(items, p); ok {
		a[format.AnnotationFileMetadata] = meta
	}
	if untested {
		a[format.AnnotationMediaTypeUntested] = "true"
	}
	return layerPlan{
		kind: k, path: p, items: items, annotations: a,
		mediaType: format.LayerMediaType(v1alpha1.FormatModelPack, k, c),
	}
}

// fileMetadata is the JSON FileMetadata of the layer's own entry (the file,
// or the folder for a folder layer; a "." layer has no entry, so none): the mode, owner, type and size its tar
// header carries, and the file's modification time, which the sources set
// from what they fetched (a commit's time, an archive entry's) so that it
// is the same on every run.
func fileMetadata(items []pack.Item, p string) (string, bool) {
	i := slices.IndexFunc(items, func(it pack.Item) bool { return it.Name == path.Clean(p) })
	if i < 0 {
		return "", false
	}
	it := items[i]
	h := pack.Header(it)
	b, err := json.Marshal(format.FileMetadata{
		Name: path.Base(it.Name), Mode: uint32(h.Mode), Uid: uint32(h.Uid), Gid: uint32(h.Gid),
		Size: h.Size, ModTime: it.ModTime.UTC().Format(time.RFC3339Nano), Typeflag: h.Typeflag,
	})
	if err != nil {
		return "", false
	}
	return string(b), true
}

// modelPackConfig fills every field of model-spec's config that the
// Kitfile and the source know; the schema (schema/config-schema.json,
// vendored in testdata) allows no others.
func modelPackConfig(kf *kitfile.Kitfile, plan []layerPlan, diffIDs []digest.Digest, p Provenance) map[string]any {
	desc := map[string]any{}
	set := func(m map[string]any, k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	name := kf.Package.Name
	if name == "" && kf.Model != nil {
		name = kf.Model.Name
	}
	set(desc, "name", name)
	set(desc, "version", firstNonEmpty(kf.Package.Version, modelField(kf, func(m *kitfile.Model) string { return m.Version })))
	set(desc, "description", firstNonEmpty(kf.Package.Description, modelField(kf, func(m *kitfile.Model) string { return m.Description })))
	if len(kf.Package.Authors) > 0 {
		desc["authors"] = kf.Package.Authors
	}
	var licenses []string
	for _, l := range []string{kf.Package.License, modelField(kf, func(m *kitfile.Model) string { return m.License })} {
		if l != "" && !slices.Contains(licenses, l) {
			licenses = append(licenses, l)
		}
	}
	slices.Sort(licenses)
	if len(licenses) > 0 {
		desc["licenses"] = licenses
	}
	set(desc, "sourceURL", p.Source)
	set(desc, "revision", p.Revision)
	if !p.Created.IsZero() {
		desc["createdAt"] = p.Created.UTC().Format(time.RFC3339)
	}
	cfg := map[string]any{}
	set(cfg, "format", firstNonEmpty(modelField(kf, func(m *kitfile.Model) string { return m.Format }), weightFormat(plan)))
	return map[string]any{
		"descriptor": desc,
		"modelfs":    map[string]any{"type": "layers", "diffIds": diffIDs},
		"config":     cfg,
	}
}

// weightFormats names the file formats whose suffix says what they are.
// Others (.bin, .pkl, …) say nothing certain, and leave format unset.
var weightFormats = map[string]string{
	".safetensors": "safetensors",
	".gguf":        "gguf",
	".onnx":        "onnx",
	".pt":          "pytorch",
	".pth":         "pytorch",
	".tflite":      "tflite",
	".keras":       "keras",
}

// weightFormat is the format shared by every weight layer, or "".
func weightFormat(plan []layerPlan) string {
	f := ""
	for _, l := range plan {
		if l.kind != format.Weight {
			continue
		}
		w := weightFormats[path.Ext(l.path)]
		if w == "" || f != "" && w != f {
			return ""
		}
		f = w
	}
	return f
}

func modelField(kf *kitfile.Kitfile, f func(*kitfile.Model) string) string {
	if kf.Model == nil {
		return ""
	}
	return f(kf.Model)
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
