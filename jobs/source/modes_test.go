package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
)

// attrs maps every file and folder under root to its mode and time.
func attrs(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = fi.Mode().String() + " " + fi.ModTime().UTC().Format(time.RFC3339)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// strictUmask runs the fetch under umask 077, so that a mode that were
// left to the umask would show up as 0600/0700.
func strictUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
}

// Git keeps the executable bit; everything else is 0644, folders 0755, and
// every time is the commit's, whatever the umask.
func TestGitModes(t *testing.T) {
	strictUmask(t)
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	for name, mode := range map[string]os.FileMode{"scripts/run.sh": 0o755, "README.md": 0o644, "secret.txt": 0o600} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(name), mode)
		os.Chmod(p, mode)
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	when := time.Date(2023, 4, 5, 6, 7, 8, 0, time.UTC)
	sig := &object.Signature{Name: "t", Email: "t@t", When: when}
	if _, err := wt.Commit("c", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: "file://" + dir}}, Env{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	at := " 2023-04-05T06:07:08Z"
	want := map[string]string{
		"README.md":      "-rw-r--r--" + at,
		"scripts":        "drwxr-xr-x" + at,
		"scripts/run.sh": "-rwxr-xr-x" + at,
		"secret.txt":     "-rw-r--r--" + at, // Git keeps no 0600
	}
	if d := cmp.Diff(want, attrs(t, got.Root)); d != "" {
		t.Errorf("checkout (-want +got):\n%s", d)
	}
	if !got.Time.Equal(when) || got.URL != "file://"+dir {
		t.Errorf("time %v url %q", got.Time, got.URL)
	}
}

// An archive's entries keep their modes and times; folders it only implies
// are 0755 at the epoch. Owner bits the worker needs are added.
func TestArchiveModes(t *testing.T) {
	strictUmask(t)
	mtime := time.Date(2022, 2, 3, 4, 5, 6, 0, time.UTC)
	at := " 2022-02-03T04:05:06Z"
	want := map[string]string{
		"bin":           "drwxr-x---" + at,
		"bin/run.sh":    "-rwxr-xr-x" + at,
		"keys":          "drwxr-xr-x 1970-01-01T00:00:00Z",
		"keys/secret":   "-rw-------" + at,
		"keys/readonly": "-r--r--r--" + at,
		"keys/noaccess": "-r--------" + at,
	}
	type ent struct {
		name string
		mode int64
		dir  bool
	}
	ents := []ent{{"bin/", 0o750, true}, {"bin/run.sh", 0o755, false}, {"keys/secret", 0o600, false}, {"keys/readonly", 0o444, false}, {"keys/noaccess", 0o000, false}}

	var tb bytes.Buffer
	zw := gzip.NewWriter(&tb)
	tw := tar.NewWriter(zw)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Typeflag: tar.TypeReg, Size: 1}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		tw.WriteHeader(h)
		if !e.dir {
			tw.Write([]byte("x"))
		}
	}
	tw.Close()
	zw.Close()

	var zb bytes.Buffer
	z := zip.NewWriter(&zb)
	for _, e := range ents {
		fh := &zip.FileHeader{Name: e.name, Modified: mtime}
		m := fs.FileMode(e.mode)
		if e.dir {
			m |= fs.ModeDir
		}
		fh.SetMode(m)
		w, _ := z.CreateHeader(fh)
		if !e.dir {
			w.Write([]byte("x"))
		}
	}
	z.Close()

	srv := serve(t, map[string][]byte{"/m.tgz": tb.Bytes(), "/m.zip": zb.Bytes()})
	for _, name := range []string{"m.tgz", "m.zip"} {
		t.Run(name, func(t *testing.T) {
			got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/" + name}}, Env{Workspace: t.TempDir(), HTTP: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, attrs(t, got.Root)); d != "" {
				t.Errorf("extracted (-want +got):\n%s", d)
			}
		})
	}
}

// A Hub file is 0644 at the revision's time, a plain download 0644 at the
// server's Last-Modified, whatever the umask.
func TestDownloadModes(t *testing.T) {
	strictUmask(t)
	hub := httptest.NewServer(&fakeHub{files: map[string][]byte{"config.json": []byte("{}"), "sub/tok.json": []byte("{}")}})
	t.Cleanup(hub.Close)
	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model"}}, hfEnv(t, hub))
	if err != nil {
		t.Fatal(err)
	}
	at := " 2024-09-25T14:32:42Z"
	want := map[string]string{"config.json": "-rw-r--r--" + at, "sub": "drwxr-xr-x" + at, "sub/tok.json": "-rw-r--r--" + at}
	if d := cmp.Diff(want, attrs(t, got.Root)); d != "" {
		t.Errorf("hub files (-want +got):\n%s", d)
	}
	if got.Time.Format(time.RFC3339) != "2024-09-25T14:32:42Z" || got.URL != hub.URL+"/org/model" {
		t.Errorf("time %v url %q", got.Time, got.URL)
	}

	modified := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "w.gguf", modified, bytes.NewReader([]byte("gguf")))
	}))
	t.Cleanup(srv.Close)
	got, err = Fetch(t.Context(), v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/w.gguf?X-Signature=secret"}}, Env{Workspace: t.TempDir(), HTTP: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"w.gguf": "-rw-r--r-- 2021-01-01T00:00:00Z"}, attrs(t, got.Root)); d != "" {
		t.Errorf("download (-want +got):\n%s", d)
	}
	if !got.Time.Equal(modified) || got.URL != srv.URL+"/w.gguf" {
		t.Errorf("time %v url %q (the query must be dropped)", got.Time, got.URL)
	}
}
