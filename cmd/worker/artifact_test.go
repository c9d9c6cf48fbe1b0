package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/push"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

func tgz(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestArtifactEndToEnd(t *testing.T) {
	host := regtest.Start(t)
	archive := tgz(t, map[string]string{"model.gguf": "gguf", "README.md": "# m", "tokenizer.json": "{}"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(archive) }))
	defer srv.Close()

	vol := t.TempDir()
	os.MkdirAll(filepath.Join(vol, "m"), 0o755)
	os.WriteFile(filepath.Join(vol, "m", "w.safetensors"), []byte("w"), 0o644)
	t.Setenv(EnvSourceVolumeDir, vol)

	cases := []struct {
		name   string
		source v1alpha1.ArtifactSource
		format v1alpha1.PackFormat
		kf     string
	}{
		{"http archive as ModelKit", v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/m.tar.gz"}}, v1alpha1.FormatModelKit,
			"package:\n  name: custom\nmodel:\n  framework: gguf\n"},
		{"volume as ModelPack", v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "m"}}, v1alpha1.FormatModelPack, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := host + "/e2e/model"
			code, res := runWorker(t, workerv1.Artifact{Source: tc.source, Format: tc.format, Kitfile: tc.kf,
				Target: workerv1.Target{Repository: target, Tag: "v1", PlainHTTP: true}})
			if code != 0 || res.Failed() {
				t.Fatalf("exit %d, result %+v", code, res.Error)
			}
			if res.SourceRevision == "" || res.Tag != "v1" || res.ArtifactType == "" {
				t.Errorf("incomplete result %+v", res)
			}
			repo, _ := registry.Repository(target, registry.Options{PlainHTTP: true})
			desc, err := repo.Resolve(t.Context(), "v1")
			if err != nil {
				t.Fatal(err)
			}
			if desc.Digest.String() != res.Digest {
				t.Errorf("tag points at %s, result says %s", desc.Digest, res.Digest)
			}
			// The image view, which containerd mounts, is named in the result.
			img, err := repo.Resolve(t.Context(), push.ImageTag(desc.Digest))
			if err != nil {
				t.Fatal(err)
			}
			if res.ImageDigest != img.Digest.String() || res.ImageReference != target+"@"+img.Digest.String() {
				t.Errorf("result names image view %s (%s), the registry has %s", res.ImageDigest, res.ImageReference, img.Digest)
			}
		})
	}
}

func TestArtifactFailures(t *testing.T) {
	r := regtest.StartWith(t, regtest.Options{})
	r.Stop()
	vol := t.TempDir()
	os.WriteFile(filepath.Join(vol, "w.gguf"), []byte("w"), 0o644)
	t.Setenv(EnvSourceVolumeDir, vol)
	cases := []struct {
		name      string
		a         workerv1.Artifact
		reason    string
		permanent bool
	}{
		{"bad kitfile", workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "p"}},
			Kitfile: "model:\n  path: /etc/passwd\n", Target: workerv1.Target{Repository: r.Host + "/x/y", PlainHTTP: true}}, "InvalidSpec", true},
		{"bad compression", workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "p"}},
			Compression: "lz4", Target: workerv1.Target{Repository: r.Host + "/x/y", PlainHTTP: true}}, "InvalidSpec", true},
		{"registry down", workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "p"}},
			Target: workerv1.Target{Repository: r.Host + "/x/y", Tag: "v1", PlainHTTP: true}}, "RegistryUnavailable", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, res := runWorker(t, tc.a)
			if code != 1 || !res.Failed() || res.Error.Reason != tc.reason || res.Error.Permanent != tc.permanent {
				t.Fatalf("exit %d, error %+v; want 1, %s permanent=%t", code, res.Error, tc.reason, tc.permanent)
			}
		})
	}
}

// The worker end to end on the real registry: an HTTP archive holding an
// executable, packed with zstd. The layers carry the zstd media type, the
// executable keeps its mode, and the manifest names where the content came
// from, with the server's time as created.
func TestArtifactCompressionModesProvenance(t *testing.T) {
	host := regtest.Start(t)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		mode int64
	}{{"model.gguf", 0o644}, {"src/run.sh", 0o755}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
	}
	tw.Close()
	zw.Close()
	modified := time.Date(2020, 6, 7, 8, 9, 10, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "m.tar.gz", modified, bytes.NewReader(buf.Bytes()))
	}))
	defer srv.Close()

	target := host + "/e2e/zstd"
	code, res := runWorker(t, workerv1.Artifact{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/m.tar.gz"}},
		Format: v1alpha1.FormatModelKit, Compression: v1alpha1.CompressionZstd,
		Target: workerv1.Target{Repository: target, Tag: "v1", PlainHTTP: true}})
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, result %+v", code, res.Error)
	}
	repo, _ := registry.Repository(target, registry.Options{PlainHTTP: true})
	m := pushedManifest(t, repo, "v1")
	want := map[string]string{
		ocispec.AnnotationSource:   srv.URL + "/m.tar.gz",
		ocispec.AnnotationRevision: res.SourceRevision,
		ocispec.AnnotationCreated:  "2020-06-07T08:09:10Z",
	}
	// The download's sha256 names its files (a re-run uploads no layer
	// the registry has): the keys are recorded beside the provenance.
	got := maps.Clone(m.Annotations)
	if got[push.AnnotationLayerKeys] == "" {
		t.Errorf("no %s annotation", push.AnnotationLayerKeys)
	}
	delete(got, push.AnnotationLayerKeys)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("manifest annotations (-want +got):\n%s", d)
	}
	modes := map[string]int64{}
	for _, l := range m.Layers {
		if !strings.HasSuffix(l.MediaType, ".tar+zstd") {
			t.Errorf("layer media type %q", l.MediaType)
		}
		rc, err := repo.Fetch(t.Context(), l)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zstd.NewReader(rc)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for h, err := tr.Next(); err == nil; h, err = tr.Next() {
			modes[h.Name] = h.Mode
		}
		zr.Close()
		rc.Close()
	}
	if d := cmp.Diff(map[string]int64{"model.gguf": 0o644, "src": 0o755, "src/run.sh": 0o755}, modes); d != "" {
		t.Errorf("tar modes (-want +got):\n%s", d)
	}
}

// A volume is packed in place: an executable and a 0600 file keep their
// modes, here read back from the ModelPack layers' file metadata, and the
// newest file's time is the manifest's created.
func TestVolumeModesAsModelPack(t *testing.T) {
	host := regtest.Start(t)
	vol := t.TempDir()
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for name, mode := range map[string]os.FileMode{"m/w.safetensors": 0o644, "m/tokenizer.json": 0o600, "m/src/run.sh": 0o755} {
		p := filepath.Join(vol, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x"), mode)
		os.Chmod(p, mode)
		os.Chtimes(p, when, when)
	}
	t.Setenv(EnvSourceVolumeDir, vol)
	target := host + "/e2e/volume"
	code, res := runWorker(t, workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "m"}},
		Format: v1alpha1.FormatModelPack, Target: workerv1.Target{Repository: target, Tag: "v1", PlainHTTP: true}})
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, result %+v", code, res.Error)
	}
	repo, _ := registry.Repository(target, registry.Options{PlainHTTP: true})
	m := pushedManifest(t, repo, "v1")
	if m.Annotations[ocispec.AnnotationCreated] != "2021-03-04T05:06:07Z" {
		t.Errorf("created = %q", m.Annotations[ocispec.AnnotationCreated])
	}
	modes := map[string]uint32{}
	for _, l := range m.Layers {
		var meta struct {
			Mode uint32 `json:"mode"`
		}
		if err := json.Unmarshal([]byte(l.Annotations["org.cncf.model.file.metadata+json"]), &meta); err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		modes[l.Annotations["org.cncf.model.filepath"]] = meta.Mode
		// The code folder's own tar: the script inside keeps its mode.
		if l.Annotations["org.cncf.model.filepath"] == "src" {
			rc, err := repo.Fetch(t.Context(), l)
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(rc)
			for h, err := tr.Next(); err == nil; h, err = tr.Next() {
				modes["tar:"+h.Name] = uint32(h.Mode)
			}
			rc.Close()
		}
	}
	// The generated Kitfile: the weight and tokenizer are the model, src
	// is code (kit init's rules).
	want := map[string]uint32{"w.safetensors": 0o644, "tokenizer.json": 0o600, "src": 0o755, "tar:src": 0o755, "tar:src/run.sh": 0o755}
	if d := cmp.Diff(want, modes); d != "" {
		t.Errorf("modes (-want +got):\n%s", d)
	}
}
