package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/regtest"
)

// A Hub model's weights are hashed while they download: on the real
// registry their layers go up in one PUT each under the digest known
// already (no chunked PATCH, which a client that hashes while sending
// needs), and are the very layers a push of the same files from a volume,
// hashed while sent, gives.
func TestHuggingFaceHashedWhileDownloaded(t *testing.T) {
	reg, up := regtest.Proxy(t, regtest.Start(t))
	const size = 3 << 19 // over push's in-memory limit
	files := map[string][]byte{
		"model-00001-of-00002.safetensors": shard(1, size),
		"model-00002-of-00002.safetensors": shard(2, size),
		"config.json":                      []byte(`{"model_type":"pre"}`),
	}
	hub, err := hfserver.Start(map[string]hfserver.Repo{"org/pre": {Files: files}})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	vol := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(vol, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvSourceVolumeDir, vol)

	layers := func(src v1alpha1.ArtifactSource, repo string) ([]string, int64) {
		digests, patches, uploaded := pushedLayers(t, reg, up, src, repo)
		if uploaded < 2*size {
			t.Fatalf("uploaded %d bytes, want both shards", uploaded)
		}
		return digests, patches
	}
	fromHub, hubPatches := layers(v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/pre", Endpoint: hub.URL}}, "pre/hub")
	fromVolume, volPatches := layers(v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc"}}, "pre/volume")
	if hubPatches != 0 {
		t.Errorf("the Hub import sent %d chunked uploads, want none: every big layer's digest was known", hubPatches)
	}
	if volPatches != 2 {
		t.Errorf("the volume push sent %d chunked uploads, want one per shard (2)", volPatches)
	}
	if !slices.Equal(fromHub, fromVolume) {
		t.Errorf("layers from the Hub %v differ from the same files' from a volume %v", fromHub, fromVolume)
	}
}

// A plain HTTP file of known length is hashed as its layer while it
// downloads, and goes up in one PUT; without a length it is hashed while
// sent. Either way the layer is the one a volume push of the file gives.
func TestHTTPHashedWhileDownloaded(t *testing.T) {
	reg, up := regtest.Proxy(t, regtest.Start(t))
	body := shard(3, 3<<19)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "chunked") {
			w.Write(body[:1])
			w.(http.Flusher).Flush() // no Content-Length from here on
			w.Write(body[1:])
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "model.gguf"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSourceVolumeDir, vol)
	push := func(src v1alpha1.ArtifactSource, repo string) (string, int64) {
		digests, patches, _ := pushedLayers(t, reg, up, src, repo)
		if len(digests) != 1 {
			t.Fatalf("%d layers, want 1", len(digests))
		}
		return digests[0], patches
	}
	want, _ := push(v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc"}}, "http-pre/volume")
	for _, tc := range []struct {
		path    string
		patches int64
	}{{"/model.gguf", 0}, {"/chunked/model.gguf", 1}} {
		got, patches := push(v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + tc.path}}, "http-pre"+strings.ReplaceAll(strings.TrimSuffix(tc.path, ".gguf"), "/", "-"))
		if got != want {
			t.Errorf("%s: layer %s, want the volume push's %s", tc.path, got, want)
		}
		if patches != tc.patches {
			t.Errorf("%s: %d chunked uploads, want %d", tc.path, patches, tc.patches)
		}
	}
}

// pushedLayers runs the worker from src to reg/repo as a ModelPack and
// returns the manifest's layer digests (sorted), and the chunked uploads
// and bytes the proxy saw.
func pushedLayers(t *testing.T, reg string, up *regtest.Counter, src v1alpha1.ArtifactSource, repo string) (digests []string, patches, uploaded int64) {
	t.Helper()
	up.Reset()
	code, res := runWorker(t, workerv1.Artifact{Source: src, Format: v1alpha1.FormatModelPack,
		Target: workerv1.Target{Repository: reg + "/" + repo, Tag: "v1", PlainHTTP: true}})
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, error %+v", code, res.Error)
	}
	r, _ := registry.Repository(reg+"/"+repo, registry.Options{PlainHTTP: true})
	for _, l := range pushedManifest(t, r, res.Digest).Layers {
		digests = append(digests, l.Digest.String())
	}
	slices.Sort(digests)
	return digests, up.Patches(), up.Uploaded()
}
