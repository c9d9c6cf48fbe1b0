package push

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/fixtures"
	"github.com/packline/packline/test/regtest"
)

// goldenKitfile parses the golden folder's Kitfile.
func goldenKitfile(t *testing.T) *kitfile.Kitfile {
	t.Helper()
	kf, err := kitfile.Parse([]byte(fixtures.GoldenKitfile))
	if err != nil {
		t.Fatal(err)
	}
	return kf
}

func pull(t *testing.T, repo *remote.Repository, ref string) (ocispec.Manifest, []byte) {
	t.Helper()
	ctx := t.Context()
	mdesc, err := repo.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := content.FetchAll(ctx, repo, mdesc)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	cb, err := content.FetchAll(ctx, repo, m.Config)
	if err != nil {
		t.Fatal(err)
	}
	return m, cb
}

// TestGoldenOnRegistry pushes the golden folder with its Kitfile to the real
// registry and finds there the layer and config digests `kit pack` wrote for
// the same folder: the two share every layer.
func TestGoldenOnRegistry(t *testing.T) {
	host := regtest.Start(t)
	root := t.TempDir()
	if err := fixtures.WriteGolden(root); err != nil {
		t.Fatal(err)
	}
	for _, c := range []v1alpha1.Compression{v1alpha1.CompressionNone, v1alpha1.CompressionGzip} {
		t.Run(string(c), func(t *testing.T) {
			repo := repoAt(t, host, "golden/"+string(c), registry.Options{})
			if _, _, err := Push(t.Context(), repo, root, goldenKitfile(t), Options{Compression: c, Tag: "v1"}); err != nil {
				t.Fatal(err)
			}
			m, cb := pull(t, repo, "v1")
			var got []string
			for _, l := range m.Layers {
				got = append(got, l.Digest.String())
				if l.Annotations != nil {
					t.Errorf("layer %s has annotations %v; kit writes none", l.Digest, l.Annotations)
				}
			}
			if d := cmp.Diff(fixtures.GoldenDigests[c], got); d != "" {
				t.Errorf("layer digests (-kit +ours):\n%s", d)
			}
			if m.Config.Digest.String() != fixtures.GoldenConfigDigests[c] {
				t.Errorf("config digest %s, kit's %s; config:\n%s", m.Config.Digest, fixtures.GoldenConfigDigests[c], cb)
			}
		})
	}
}

// TestConformance pushes the golden folder in each format and compression
// to the real registry, pulls it back, checks every media type, annotation
// and config field against jobs/format and model-spec's schema, unpacks the
// layers as `kit unpack` does (tar names at the root, each header's mode)
// and compares every file, bytes and mode, with the source.
func TestConformance(t *testing.T) {
	host := regtest.Start(t)
	schema := compileSchema(t)
	root := t.TempDir()
	if err := fixtures.WriteGolden(root); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	prov := Provenance{Source: "https://example.com/golden.git", Revision: "0123456789abcdef0123456789abcdef01234567", Created: created}
	for _, f := range []v1alpha1.PackFormat{v1alpha1.FormatModelKit, v1alpha1.FormatModelPack} {
		for _, c := range format.Compressions {
			t.Run(string(f)+"/"+string(c), func(t *testing.T) {
				repo := repoAt(t, host, "conf/"+strings.ToLower(string(f))+"-"+string(c), registry.Options{})
				stated := func(p string) bool { return p != "model/config.json" } // as if generated
				o := Options{Format: f, Compression: c, Tag: "v1", Provenance: prov, Stated: stated}
				if _, _, err := Push(t.Context(), repo, root, goldenKitfile(t), o); err != nil {
					t.Fatal(err)
				}
				m, cb := pull(t, repo, "v1")
				if m.MediaType != ocispec.MediaTypeImageManifest || m.ArtifactType != format.ArtifactType(f) || m.Config.MediaType != format.ConfigMediaType(f) {
					t.Errorf("manifest %q artifactType %q config %q", m.MediaType, m.ArtifactType, m.Config.MediaType)
				}
				wantAnn := map[string]string{
					ocispec.AnnotationSource:   prov.Source,
					ocispec.AnnotationRevision: prov.Revision,
					ocispec.AnnotationCreated:  "2025-05-06T07:08:09Z",
				}
				if d := cmp.Diff(wantAnn, m.Annotations); d != "" {
					t.Errorf("manifest annotations (-want +got):\n%s", d)
				}
				var layers []gotLayer
				for _, l := range m.Layers {
					gf, k, gc, ok := format.ParseLayer(l.MediaType)
					if !ok || gf != f || gc != c {
						t.Errorf("layer %s: media type %q", l.Digest, l.MediaType)
					}
					layers = append(layers, gotLayer{k, l.Annotations})
				}
				if f == v1alpha1.FormatModelKit {
					checkKitConfig(t, cb, m)
				} else {
					checkModelPack(t, schema, cb, m, layers)
				}
				out := t.TempDir()
				for _, l := range m.Layers {
					rc, err := repo.Fetch(t.Context(), l)
					if err != nil {
						t.Fatal(err)
					}
					unpack(t, rc, c, out)
					rc.Close()
				}
				if d := cmp.Diff(readTree(t, root), readTree(t, out)); d != "" {
					t.Errorf("unpacked files differ (-source +unpacked):\n%s", d)
				}
			})
		}
	}
}

type gotLayer struct {
	kind        format.Kind
	annotations map[string]string
}

// checkKitConfig reads the config as kit does: each Kitfile entry's digest
// is its layer's, in order.
func checkKitConfig(t *testing.T, cb []byte, m ocispec.Manifest) {
	t.Helper()
	kf, err := kitfile.Parse(cb)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	entries := kf.Entries()
	if len(entries) != len(m.Layers) {
		t.Fatalf("%d Kitfile entries for %d layers", len(entries), len(m.Layers))
	}
	for i, e := range entries {
		_, k, _, _ := format.ParseLayer(m.Layers[i].MediaType)
		if k != e.Kind || *e.Info == nil || (*e.Info).Digest != m.Layers[i].Digest.String() {
			t.Errorf("layer %d (%s): Kitfile %s %v", i, m.Layers[i].Digest, e.Kind, *e.Info)
		}
	}
}

// checkModelPack checks the kinds model-spec asks for, the layer
// annotations, and the config against model-spec's schema.
func checkModelPack(t *testing.T, schema *jsonschema.Schema, cb []byte, m ocispec.Manifest, layers []gotLayer) {
	t.Helper()
	type want struct {
		kind     format.Kind
		path     string
		untested bool
		mode     uint32
		typeflag byte
		size     int64
	}
	wants := []want{
		{format.Weight, "model/weights.safetensors", false, 0o644, '0', 7},
		{format.WeightConfig, "model/config.json", true, 0o600, '0', 7},
		{format.Code, "scripts", false, 0o755, '5', 0},
		{format.Dataset, "data", false, 0o755, '5', 0},
		{format.Doc, "README.md", false, 0o644, '0', 9},
	}
	if len(layers) != len(wants) {
		t.Fatalf("%d layers, want %d", len(layers), len(wants))
	}
	for i, w := range wants {
		l := layers[i]
		if l.kind != w.kind || l.annotations[format.AnnotationFilepath] != w.path {
			t.Errorf("layer %d: %s %q, want %s %q", i, l.kind, l.annotations[format.AnnotationFilepath], w.kind, w.path)
		}
		if got := l.annotations[format.AnnotationMediaTypeUntested] == "true"; got != w.untested {
			t.Errorf("layer %d (%s): untested %t, want %t", i, w.path, got, w.untested)
		}
		var meta format.FileMetadata
		if err := json.Unmarshal([]byte(l.annotations[format.AnnotationFileMetadata]), &meta); err != nil {
			t.Fatalf("layer %d metadata: %v", i, err)
		}
		wantMeta := format.FileMetadata{Name: path.Base(w.path), Mode: w.mode, Uid: 1000, Gid: 0, Size: w.size,
			ModTime: "2024-01-02T03:04:05Z", Typeflag: w.typeflag}
		if d := cmp.Diff(wantMeta, meta); d != "" {
			t.Errorf("layer %d metadata (-want +got):\n%s", i, d)
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(cb))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Errorf("config does not validate against model-spec's schema: %v\n%s", err, cb)
	}
	var cfg struct {
		Descriptor map[string]any `json:"descriptor"`
		Config     map[string]any `json:"config"`
		ModelFS    struct {
			DiffIDs []string `json:"diffIds"`
		} `json:"modelfs"`
	}
	if err := json.Unmarshal(cb, &cfg); err != nil {
		t.Fatal(err)
	}
	wantDesc := map[string]any{
		"name": "golden", "createdAt": "2025-05-06T07:08:09Z",
		"sourceURL": "https://example.com/golden.git", "revision": "0123456789abcdef0123456789abcdef01234567",
	}
	if d := cmp.Diff(wantDesc, cfg.Descriptor); d != "" {
		t.Errorf("config descriptor (-want +got):\n%s", d)
	}
	if cfg.Config["format"] != "safetensors" {
		t.Errorf("config.format = %v, want safetensors", cfg.Config["format"])
	}
	if len(cfg.ModelFS.DiffIDs) != len(m.Layers) {
		t.Errorf("%d diffIds for %d layers", len(cfg.ModelFS.DiffIDs), len(m.Layers))
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "config-schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("config-schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("config-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unpack extracts like kit's extractTar (pkg/cmd/unpack): names at the
// root, folders and files created with their header's mode. The names are
// checked to stay inside dir.
func unpack(t *testing.T, r io.Reader, c v1alpha1.Compression, dir string) {
	t.Helper()
	switch c {
	case v1alpha1.CompressionGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case v1alpha1.CompressionZstd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("tar entry %q leaves the folder", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, h.FileInfo().Mode().Perm()); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, h.FileInfo().Mode().Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		default:
			t.Errorf("tar entry %q has type %c", h.Name, h.Typeflag)
		}
	}
}

// readTree maps every file and folder under root to its mode and body.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "Kitfile" {
			return nil // travels as the config, not a layer
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		body := ""
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			body = string(b)
		}
		out[filepath.ToSlash(rel)] = info.Mode().String() + " " + body
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The schema check can fail: a field the schema does not allow, a missing
// modelfs, a createdAt that is not a date-time.
func TestSchemaRefusesBadConfigs(t *testing.T) {
	schema := compileSchema(t)
	for _, bad := range []string{
		`{"descriptor":{},"config":{"framework":"pytorch"},"modelfs":{"type":"layers","diffIds":["sha256:x"]}}`,
		`{"descriptor":{},"config":{}}`,
		`{"descriptor":{"createdAt":"yesterday"},"config":{},"modelfs":{"type":"layers","diffIds":["sha256:x"]}}`,
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if schema.Validate(inst) == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}
