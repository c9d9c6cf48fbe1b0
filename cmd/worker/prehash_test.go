package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/jobs/spec"
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

	layers := func(t *testing.T, src v1alpha1.ArtifactSource, repo string) (digests []string, patches int64) {
		t.Helper()
		up.Reset()
		code, res := runWorker(t, spec.Artifact{Source: src, Format: v1alpha1.FormatModelPack,
			Target: spec.Target{Repository: reg + "/" + repo, Tag: "v1", PlainHTTP: true}})
		if code != 0 || res.Failed() {
			t.Fatalf("exit %d, error %+v", code, res.Error)
		}
		if up.Uploaded() < 2*size {
			t.Fatalf("uploaded %d bytes, want both shards", up.Uploaded())
		}
		r, _ := registry.Repository(reg+"/"+repo, registry.Options{PlainHTTP: true})
		for _, l := range pushedManifest(t, r, res.Digest).Layers {
			digests = append(digests, l.Digest.String())
		}
		slices.Sort(digests)
		return digests, up.Patches()
	}
	fromHub, hubPatches := layers(t, v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/pre", Endpoint: hub.URL}}, "pre/hub")
	fromVolume, volPatches := layers(t, v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc"}}, "pre/volume")
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
