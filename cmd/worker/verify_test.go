package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/test/regtest"
)

// TestVerifyOnRealRegistry: `worker verify` passes while the tag points at
// the pushed digest, reports TagMoved once another push moves the tag, and
// ArtifactMissing once the digest is deleted; all permanent.
func TestVerifyOnRealRegistry(t *testing.T) {
	host := regtest.Start(t)
	vol := t.TempDir()
	if err := os.MkdirAll(filepath.Join(vol, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSourceVolumeDir, vol)
	push := func(content string) workerv1.Result {
		if err := os.WriteFile(filepath.Join(vol, "m", "w.safetensors"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		code, res := runWorker(t, workerv1.Artifact{
			Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "m"}},
			Format: v1alpha1.FormatModelKit,
			Target: workerv1.Target{Repository: host + "/verify/model", Tag: "v1", PlainHTTP: true},
		})
		if code != 0 {
			t.Fatalf("push failed: %+v", res.Error)
		}
		return res
	}
	target := workerv1.Target{Tag: "v1", PlainHTTP: true}
	verify := func(ref, wantReason string) {
		t.Helper()
		code, res := runCommand(t, "verify", workerv1.Verify{Reference: ref, Target: target})
		switch {
		case wantReason == "" && (code != 0 || res.Failed()):
			t.Fatalf("verify of %s failed: %+v", ref, res.Error)
		case wantReason != "" && (code == 0 || res.Error == nil || res.Error.Reason != wantReason || !res.Error.Permanent):
			t.Fatalf("verify of %s: exit %d, result %+v, want permanent %s", ref, code, res, wantReason)
		}
	}
	first := push("one")
	verify(first.Reference, "")
	second := push("two") // moves v1
	verify(first.Reference, "TagMoved")
	verify(second.Reference, "")
	if code, res := runDeleteWorker(t, workerv1.Delete{Reference: second.Reference, Target: target}); code != 0 {
		t.Fatalf("delete failed: %+v", res.Error)
	}
	verify(second.Reference, "ArtifactMissing")
}
