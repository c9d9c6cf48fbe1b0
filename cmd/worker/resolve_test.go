package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/test/regtest"
)

// TestResolveOnRealRegistry: `worker resolve` reads back, from the tag, the
// result the pushing run reported (what a run on a worker cluster cannot
// send through its termination message), and a tag that names nothing is a
// permanent ResultUnavailable.
func TestResolveOnRealRegistry(t *testing.T) {
	host := regtest.Start(t)
	vol := t.TempDir()
	if err := os.MkdirAll(filepath.Join(vol, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "m", "w.safetensors"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSourceVolumeDir, vol)
	target := workerv1.Target{Repository: host + "/resolve/model", Tag: "v1", PlainHTTP: true}
	code, pushed := runWorker(t, workerv1.Artifact{
		Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "m"}},
		Format: v1alpha1.FormatModelKit, Target: target,
	})
	if code != 0 {
		t.Fatalf("push failed: %+v", pushed.Error)
	}
	if pushed.ImageDigest == "" {
		t.Fatal("the push reported no image view; the read-back of one is not tested")
	}
	code, got := runCommand(t, "resolve", workerv1.Resolve{Target: target})
	if code != 0 || got.Failed() {
		t.Fatalf("resolve failed: exit %d, %+v", code, got.Error)
	}
	if got.Digest != pushed.Digest || got.Reference != pushed.Reference || got.MediaType != pushed.MediaType ||
		got.ArtifactType != pushed.ArtifactType || got.Size != pushed.Size ||
		got.ImageDigest != pushed.ImageDigest || got.ImageReference != pushed.ImageReference {
		t.Errorf("resolved %+v, pushed %+v", got, pushed)
	}
	target.Tag = "v9"
	if code, res := runCommand(t, "resolve", workerv1.Resolve{Target: target}); code == 0 || res.Error == nil ||
		res.Error.Reason != workerv1.ReasonResultUnavailable || !res.Error.Permanent {
		t.Errorf("an unknown tag: exit %d, result %+v", code, res)
	}
}
