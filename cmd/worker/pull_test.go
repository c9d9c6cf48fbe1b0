package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// blobRegistry serves one repository's manifests and blobs by digest, as
// the distribution API does; corrupt, when set, replaces a blob's bytes
// (same length) the way a broken disk or proxy would.
type blobRegistry struct {
	blobs   map[digest.Digest][]byte
	types   map[digest.Digest]string
	corrupt digest.Digest
}

func (r *blobRegistry) add(mediaType string, b []byte) ocispec.Descriptor {
	d := digest.FromBytes(b)
	r.blobs[d], r.types[d] = b, mediaType
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

func (r *blobRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/v2/" {
		return
	}
	i := strings.LastIndex(req.URL.Path, "/")
	d := digest.Digest(req.URL.Path[i+1:])
	b, ok := r.blobs[d]
	if !ok {
		http.NotFound(w, req)
		return
	}
	if d == r.corrupt {
		b = bytes.Repeat([]byte{'x'}, len(b))
	}
	w.Header().Set("Content-Type", r.types[d])
	w.Header().Set("Docker-Content-Digest", d.String())
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	if req.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// modelImage is an image view as the worker pushes it: one tar layer with
// an executable and a read-only file in a folder.
func modelImage(t *testing.T, r *blobRegistry) (manifest, layer ocispec.Descriptor) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		body string
	}{{"model/run.sh", 0o755, "#!/bin/sh\n"}, {"model/weights.bin", 0o444, "weights"}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer = r.add(ocispec.MediaTypeImageLayer, buf.Bytes())
	cfg := r.add(ocispec.MediaTypeImageConfig, []byte(`{"rootfs":{"type":"layers","diff_ids":["`+layer.Digest.String()+`"]}}`))
	m := must(json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: []ocispec.Descriptor{layer}}))
	return r.add(ocispec.MediaTypeImageManifest, m), layer
}

func runPullWorker(t *testing.T, args ...string) (int, workerv1.Result) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "termination-log")
	t.Setenv(EnvTerminationLog, log)
	code := run(append([]string{"pull"}, args...))
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("no termination message: %v", err)
	}
	res, err := workerv1.ParseResult(b)
	if err != nil {
		t.Fatalf("termination message %s: %v", b, err)
	}
	return code, res
}

func TestPullUnpacksVerifiedLayersWithModes(t *testing.T) {
	r := &blobRegistry{blobs: map[digest.Digest][]byte{}, types: map[digest.Digest]string{}}
	m, _ := modelImage(t, r)
	srv := httptest.NewServer(r)
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/models/tiny@" + m.Digest.String()
	dir := filepath.Join(t.TempDir(), "pulled")
	// A file from an earlier, failed attempt in the same emptyDir goes.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, res := runPullWorker(t, "--plain-http", ref, dir)
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, result %+v", code, res)
	}
	if res.Digest != m.Digest.String() || res.Reference != ref {
		t.Errorf("result %+v, want digest %s reference %s", res, m.Digest, ref)
	}
	got := map[string]string{}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			got[rel] = fi.Mode().String()
		}
		return nil
	})
	want := map[string]string{"model": "drwxr-xr-x", "model/run.sh": "-rwxr-xr-x", "model/weights.bin": "-r--r--r--"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pulled files and modes (-want +got):\n%s", d)
	}
}

func TestPullRefusesCorruptedBlob(t *testing.T) {
	r := &blobRegistry{blobs: map[digest.Digest][]byte{}, types: map[digest.Digest]string{}}
	m, layer := modelImage(t, r)
	r.corrupt = layer.Digest
	srv := httptest.NewServer(r)
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/models/tiny@" + m.Digest.String()
	dir := filepath.Join(t.TempDir(), "pulled")

	code, res := runPullWorker(t, "--plain-http", ref, dir)
	if code == 0 || !res.Failed() {
		t.Fatalf("a corrupted layer was accepted: exit %d, result %+v", code, res)
	}
	if res.Error.Reason != workerv1.ReasonChecksum || !strings.Contains(res.Error.Message, layer.Digest.String()) {
		t.Errorf("error %+v, want %s naming layer %s", res.Error, workerv1.ReasonChecksum, layer.Digest)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the folder keeps %d entries of a refused pull", len(ents))
	}
}

func TestPullRefusesTag(t *testing.T) {
	code, res := runPullWorker(t, "--plain-http", "127.0.0.1:1/models/tiny:latest", t.TempDir())
	if code == 0 || !res.Failed() || res.Error.Reason != workerv1.ReasonInvalidSpec || !strings.Contains(res.Error.Message, "needs a digest") {
		t.Fatalf("exit %d, result %+v", code, res)
	}
}
