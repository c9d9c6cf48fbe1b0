package source

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/test/gitserver"
)

// TestGitSymlinkEscapes clones, over smart HTTP, a repository whose
// symlinks lead out of the clone: to a folder standing in for the pod's
// mounted credentials and up to the filesystem's root.
// spec.source.git.path through either, and Kitfile paths through either,
// are refused; a link that stays in the repository is followed.
func TestGitSymlinkEscapes(t *testing.T) {
	// Relative link targets: the fixture writer rewrites absolute ones.
	toRoot := strings.Repeat("../", 32)
	secrets := t.TempDir() // as /var/run/packline/source-auth would be
	if err := os.MkdirAll(filepath.Join(secrets, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "sub", "password"), []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{{
		Files: map[string]string{"model/w.gguf": "weights", "README.md": "r"},
		Symlinks: map[string]string{
			"creds":  toRoot + secrets, // out of the clone, to the credentials
			"up":     toRoot,           // up to /
			"inner":  "model",          // stays inside
			"nested": "model/../creds", // inside, then out
		},
	}}}, gitserver.Options{})

	fetch := func(p string) (Fetched, error) {
		return Fetch(t.Context(), v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: srv.URL, Ref: "main", Path: p}},
			Env{Workspace: t.TempDir()})
	}
	for _, p := range []string{"creds/sub", "creds", "up" + secrets + "/sub", "nested/sub", "model/../creds/sub"} {
		t.Run("path "+p, func(t *testing.T) {
			got, err := fetch(p)
			assertReason(t, err, workerv1.ReasonInvalidSpec, true)
			if got.Root != "" {
				t.Errorf("root %s", got.Root)
			}
		})
	}
	t.Run("path through a link inside", func(t *testing.T) {
		got, err := fetch("inner")
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(got.Root, "w.gguf")); err != nil || string(b) != "weights" {
			t.Errorf("w.gguf = %q, %v", b, err)
		}
	})

	whole, err := fetch("")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"creds/sub/password", "creds/sub", "up" + secrets + "/sub/password", "inner/w.gguf"} {
		t.Run("kitfile "+p, func(t *testing.T) {
			k := &kitfile.Kitfile{ManifestVersion: kitfile.ManifestVersion, Docs: []kitfile.Docs{{Path: p}}}
			err := kitfile.Validate(k, whole.Root)
			if err == nil || !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("Validate = %v, want a refused symbolic link", err)
			}
		})
	}
	// What is generated from the clone never names a link either.
	dir, err := kitfile.Scan(whole.Root)
	if err != nil {
		t.Fatal(err)
	}
	if err := kitfile.Validate(kitfile.Generate(dir), whole.Root); err != nil {
		t.Errorf("generated Kitfile: %v", err)
	}
	// A catch-all "." layer (kit init's, when a file lies loose at the
	// root) skips the links without following them: no credential in it.
	all := &kitfile.Kitfile{ManifestVersion: kitfile.ManifestVersion, Code: []kitfile.Code{{Path: "."}}}
	if err := kitfile.Validate(all, whole.Root); err != nil {
		t.Fatalf("catch-all Kitfile: %v", err)
	}
	items, err := pack.Walk(whole.Root, ".", all.Paths())
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	if _, err := pack.Write(&layer, items, v1alpha1.CompressionNone); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(layer.Bytes(), []byte("hunter2")) {
		t.Error("the catch-all layer followed a link to the credentials")
	}
	for _, it := range items {
		if it.Name == "creds" || it.Name == "up" || it.Name == "inner" || it.Name == "nested" {
			t.Errorf("the catch-all layer holds the link %s", it.Name)
		}
	}
}

// TestExtractionStaysInItsRoot: extraction writes through an os.Root on
// the extraction folder, so a link found there (the folder is fresh, but
// the workspace outlives attempts) cannot carry a write out of it.
func TestExtractionStaysInItsRoot(t *testing.T) {
	outside := t.TempDir()
	for _, gz := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		tarball := makeTar(t, gz, tarEntry{name: "link/evil.txt", body: "x"}, tarEntry{name: "link/sub/evil.txt", body: "x"})
		err := extractTar(bytes.NewReader(tarball), gz, dir, Limits{})
		assertReason(t, err, workerv1.ReasonUnsafeArchive, true)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("extraction wrote outside its root: %v", entries)
	}
}
