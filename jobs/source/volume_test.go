package source

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/failure"
)

func TestVolume(t *testing.T) {
	mount := t.TempDir()
	os.MkdirAll(filepath.Join(mount, "models", "a"), 0o755)
	os.WriteFile(filepath.Join(mount, "models", "a", "w.gguf"), []byte("w"), 0o644)
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(mount, "escape"))
	env := Env{SourceVolumeDir: mount}

	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "models/a"}}, env)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(mount, "models", "a"))
	if got.Root != want || got.Revision == "" {
		t.Errorf("got %+v, want root %s and a revision", got, want)
	}
	// The revision follows the content.
	os.WriteFile(filepath.Join(mount, "models", "a", "more.bin"), []byte("m"), 0o644)
	again, _ := Fetch(t.Context(), v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "models/a"}}, env)
	if again.Revision == got.Revision {
		t.Error("revision did not change with the files")
	}

	for _, p := range []string{"escape", "../", "models/../../x", "missing"} {
		_, err := Fetch(t.Context(), v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: p}}, env)
		var fe *failure.Error
		if err == nil || !asFailure(err, &fe) || !fe.Permanent {
			t.Errorf("path %q: err %v, want a permanent failure", p, err)
		}
	}
}
