package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/push"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

// A volume's digest follows its content only. What moves a file's stat
// fingerprint but not its bytes, mode or time (a chmod to the same mode, a
// touch back to the same time, a `cp -a` copy: new inodes and ctimes) gives
// the same digest, in both formats; the fingerprints, which let an
// unchanged volume skip its layers, are kept beside the manifest, in its
// side manifest, not in it.
func TestVolumeDigestFollowsContent(t *testing.T) {
	cp, err := exec.LookPath("cp")
	if err != nil {
		t.Skip("no cp to copy the volume with")
	}
	reg, up := regtest.Proxy(t, regtest.Start(t))
	vol := filepath.Join(t.TempDir(), "vol")
	when := time.Date(2022, 2, 3, 4, 5, 6, 7, time.UTC)
	files := map[string]os.FileMode{"m/w.safetensors": 0o644, "m/config.json": 0o600, "m/src/run.sh": 0o755}
	for name, mode := range files {
		p := filepath.Join(vol, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, shard(byte(len(name)), 4<<10), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chtimes(p, when, when)
	}
	// Folder times too: a ModelPack records a folder layer's.
	for _, d := range []string{"m/src", "m"} {
		os.Chtimes(filepath.Join(vol, filepath.FromSlash(d)), when, when)
	}
	sameBytesNewStat := func(t *testing.T) {
		for name, mode := range files {
			p := filepath.Join(vol, filepath.FromSlash(name))
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, when, when); err != nil {
				t.Fatal(err)
			}
		}
	}
	copied := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command(cp, "-a", vol, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}

	for _, f := range []v1alpha1.PackFormat{v1alpha1.FormatModelKit, v1alpha1.FormatModelPack} {
		t.Run(string(f), func(t *testing.T) {
			job := func(repo string) workerv1.Artifact {
				return workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "m"}},
					Format: f, Target: workerv1.Target{Repository: reg + "/" + repo, Tag: "v1", PlainHTTP: true}}
			}
			target := "vol-digest/" + strings.ToLower(string(f))
			t.Setenv(EnvSourceVolumeDir, vol)
			first, _ := runUploaded(t, up, job(target))

			// Unchanged, it still sends nothing: the keys are found beside.
			if again, u := runUploaded(t, up, job(target)); again.Digest != first.Digest || u != 0 {
				t.Errorf("unchanged: digest %s (want %s), uploaded %d bytes (want none)", again.Digest, first.Digest, u)
			}

			t.Run("chmod to the same mode and touch to the same time", func(t *testing.T) {
				sameBytesNewStat(t)
				if res, _ := runUploaded(t, up, job(target)); res.Digest != first.Digest {
					t.Errorf("digest %s, want %s", res.Digest, first.Digest)
				}
			})
			t.Run("cp -a copy", func(t *testing.T) {
				t.Setenv(EnvSourceVolumeDir, copied)
				if res, _ := runUploaded(t, up, job(target)); res.Digest != first.Digest {
					t.Errorf("into the same repository: digest %s, want %s", res.Digest, first.Digest)
				}
				if res, _ := runUploaded(t, up, job(target+"-copy")); res.Digest != first.Digest {
					t.Errorf("into a new repository: digest %s, want %s", res.Digest, first.Digest)
				}
			})
			// The fingerprints are kept beside the manifest, not in it.
			repo, _ := registry.Repository(reg+"/"+target, registry.Options{PlainHTTP: true})
			m := pushedManifest(t, repo, first.Digest)
			if keys, ok := m.Annotations[push.AnnotationLayerKeys]; ok {
				t.Errorf("the manifest carries stat fingerprints' keys: %s", keys)
			}
			side := pushedManifest(t, repo, push.KeysTag(digest.Digest(first.Digest)))
			if side.ArtifactType != push.ArtifactTypeLayerKeys || side.Annotations[push.AnnotationLayerKeys] == "" {
				t.Errorf("side manifest %s: artifactType %q, annotations %v", push.KeysTag(digest.Digest(first.Digest)), side.ArtifactType, side.Annotations)
			}
		})
	}
}
