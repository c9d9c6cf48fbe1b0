package push

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

// TestConformance pulls each format back from the real registry, checks
// every media type and annotation against jobs/format, checks the config the
// way kit reads it (Kitfile layer digests match the manifest), unpacks the
// layers as `kit unpack` does (tar names at the root) and compares every file
// byte for byte with the source.
func TestConformance(t *testing.T) {
	host := regtest.Start(t)
	for _, tc := range []struct {
		f  v1alpha1.PackFormat
		gz bool
	}{
		{v1alpha1.FormatModelKit, false},
		{v1alpha1.FormatModelKit, true},
		{v1alpha1.FormatModelPack, false},
	} {
		t.Run(string(tc.f), func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, modelFiles)
			repo := repoAt(t, host, "conf/"+strings.ToLower(string(tc.f)), registry.Options{})
			kf := generated(t, root)
			if _, _, err := Push(t.Context(), repo, root, kf, Options{Format: tc.f, Gzip: tc.gz, Tag: "v1"}); err != nil {
				t.Fatal(err)
			}

			ctx := t.Context()
			mdesc, err := repo.Resolve(ctx, "v1")
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
			if m.MediaType != ocispec.MediaTypeImageManifest || m.ArtifactType != format.ArtifactType(tc.f) {
				t.Errorf("manifest mediaType %q artifactType %q", m.MediaType, m.ArtifactType)
			}
			if m.Config.MediaType != format.ConfigMediaType(tc.f) {
				t.Errorf("config mediaType %q", m.Config.MediaType)
			}
			cb, err := content.FetchAll(ctx, repo, m.Config)
			if err != nil {
				t.Fatal(err)
			}

			// The Kitfile kit will use: the config for a ModelKit, the
			// manifest annotation for a ModelPack.
			kfJSON := cb
			if tc.f == v1alpha1.FormatModelPack {
				kfJSON = []byte(m.Annotations[format.KitAnnotationKitfile])
				var mp struct {
					ModelFS struct {
						Type    string   `json:"type"`
						DiffIDs []string `json:"diffIds"`
					} `json:"modelfs"`
				}
				if err := json.Unmarshal(cb, &mp); err != nil {
					t.Fatal(err)
				}
				if mp.ModelFS.Type != "layers" || len(mp.ModelFS.DiffIDs) != len(m.Layers) {
					t.Errorf("modelfs = %+v for %d layers", mp.ModelFS, len(m.Layers))
				}
			}
			got, err := kitfile.Parse(kfJSON)
			if err != nil {
				t.Fatalf("Kitfile in artifact: %v", err)
			}
			entries := got.Entries()
			if len(entries) != len(m.Layers) {
				t.Fatalf("%d Kitfile entries for %d layers", len(entries), len(m.Layers))
			}

			out := t.TempDir()
			for i, l := range m.Layers {
				e := entries[i]
				f, k, gz, ok := format.ParseLayer(l.MediaType)
				if !ok || f != tc.f || k != e.Kind || gz != tc.gz {
					t.Errorf("layer %d mediaType %q for a %s entry", i, l.MediaType, e.Kind)
				}
				if l.Annotations[format.AnnotationFilepath] != e.Path {
					t.Errorf("layer %d filepath annotation %q, want %q", i, l.Annotations[format.AnnotationFilepath], e.Path)
				}
				if (*e.Info) == nil || (*e.Info).Digest != l.Digest.String() {
					t.Errorf("layer %d: Kitfile digest %v, manifest %s", i, *e.Info, l.Digest)
				}
				rc, err := repo.Fetch(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				untar(t, rc, gz, out, e.Path)
				rc.Close()
			}
			if d := cmp.Diff(readTree(t, root), readTree(t, out)); d != "" {
				t.Errorf("unpacked files differ (-source +unpacked):\n%s", d)
			}
		})
	}
}

// untar extracts like kit's extractTar, and checks every name lies within
// the entry's path (kit's VerifySubpath is against the root; ours is stricter).
func untar(t *testing.T, r io.Reader, gz bool, dir, entryPath string) {
	t.Helper()
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
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
		if h.Name != entryPath && !strings.HasPrefix(h.Name, entryPath+"/") && !strings.HasPrefix(entryPath, h.Name+"/") {
			t.Errorf("tar entry %q outside layer path %q", h.Name, entryPath)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("tar entry %q: uid %d gid %d mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("tar entry %q has type %c", h.Name, h.Typeflag)
		}
	}
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	files, err := kitfile.List(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		out[f.Path] = string(b)
	}
	return out
}
