package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	jobspush "github.com/packline/packline/jobs/push"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

// TestDeleteOnRealRegistry pushes an artifact, then deletes it through the
// worker: it goes while the tag points at it, and stays once the tag moved.
func TestDeleteOnRealRegistry(t *testing.T) {
	host := regtest.Start(t)
	vol := t.TempDir()
	if err := os.MkdirAll(filepath.Join(vol, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSourceVolumeDir, vol)
	push := func(content, tag string) workerv1.Result {
		if err := os.WriteFile(filepath.Join(vol, "m", "w.safetensors"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		code, res := runWorker(t, workerv1.Artifact{
			Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "m"}},
			Format: v1alpha1.FormatModelKit,
			Target: workerv1.Target{Repository: host + "/del/model", Tag: tag, PlainHTTP: true},
		})
		if code != 0 {
			t.Fatalf("push failed: %+v", res.Error)
		}
		return res
	}
	exists := func(ref string) bool {
		repo, err := registry.Repository(host+"/del/model", registry.Options{PlainHTTP: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = repo.Resolve(context.Background(), ref)
		return err == nil
	}
	target := workerv1.Target{Tag: "v1", PlainHTTP: true}

	first := push("one", "v1")
	if !exists(first.ImageDigest) {
		t.Fatalf("no image view %q beside the push", first.ImageDigest)
	}
	if code, res := runDeleteWorker(t, workerv1.Delete{Reference: first.Reference, Target: target}); code != 0 {
		t.Fatalf("delete failed: %+v", res.Error)
	}
	if exists(first.Digest) || exists("v1") {
		t.Fatal("manifest still resolvable after delete")
	}
	// The volume's layer keys, kept beside it, go with it.
	if exists(jobspush.KeysTag(digest.Digest(first.Digest))) {
		t.Error("the layer keys beside the deleted manifest are still there")
	}
	// And so does its image view.
	if exists(jobspush.ImageTag(digest.Digest(first.Digest))) || exists(first.ImageDigest) {
		t.Error("the image view of the deleted manifest is still there")
	}
	// Deleting again is a success: the goal state holds.
	if code, res := runDeleteWorker(t, workerv1.Delete{Reference: first.Reference, Target: target}); code != 0 {
		t.Fatalf("second delete failed: %+v", res.Error)
	}

	old := push("two", "v1")
	newer := push("three", "v1") // someone moved the tag on
	if code, res := runDeleteWorker(t, workerv1.Delete{Reference: old.Reference, Target: target}); code != 0 {
		t.Fatalf("delete failed: %+v", res.Error)
	}
	if !exists(newer.Digest) || !exists("v1") {
		t.Fatal("a newer push to the same tag was removed")
	}

	if code, res := runDeleteWorker(t, workerv1.Delete{Reference: "not-a-reference", Target: target}); code == 0 || !res.Error.Permanent {
		t.Fatalf("bad reference: code %d result %+v", code, res)
	}
}
