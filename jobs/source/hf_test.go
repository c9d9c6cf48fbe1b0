package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

const (
	hfCommit     = "0123456789abcdef0123456789abcdef01234567"
	hfCommitTime = "2024-09-25T14:32:42.000Z" // the Hub's lastModified format
)

// fakeHub serves the Hub endpoints the client calls: model info by revision
// (with siblings and LFS hashes), resolve/<rev>/<file> answered with a
// redirect to a "CDN" path that honours Range, and 401 for a gated repo
// without the token.
type fakeHub struct {
	files  map[string][]byte
	gated  bool
	token  string
	served atomic.Int64 // file bytes sent
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.gated && r.Header.Get("Authorization") != "Bearer "+h.token && !strings.HasPrefix(r.URL.Path, "/cdn/") {
		http.Error(w, "gated", http.StatusUnauthorized)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/models/org/model/revision/"):
		rev := strings.TrimPrefix(r.URL.Path, "/api/models/org/model/revision/")
		if rev != "main" && rev != hfCommit {
			http.NotFound(w, r)
			return
		}
		type lfs struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		}
		type sib struct {
			RFilename string `json:"rfilename"`
			LFS       *lfs   `json:"lfs,omitempty"`
		}
		info := struct {
			SHA          string `json:"sha"`
			LastModified string `json:"lastModified"`
			Siblings     []sib  `json:"siblings"`
		}{SHA: hfCommit, LastModified: hfCommitTime}
		for name, b := range h.files {
			s := sib{RFilename: name}
			if strings.HasSuffix(name, ".safetensors") {
				sum := sha256.Sum256(b)
				s.LFS = &lfs{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))}
			}
			info.Siblings = append(info.Siblings, s)
		}
		_ = json.NewEncoder(w).Encode(info)
	case strings.HasPrefix(r.URL.Path, "/org/model/resolve/"+hfCommit+"/"):
		name := strings.TrimPrefix(r.URL.Path, "/org/model/resolve/"+hfCommit+"/")
		http.Redirect(w, r, "/cdn/"+name, http.StatusFound)
	case strings.HasPrefix(r.URL.Path, "/cdn/"):
		b, ok := h.files[strings.TrimPrefix(r.URL.Path, "/cdn/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		cw := &countingResponse{ResponseWriter: w, n: &h.served}
		http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(b))
	default:
		http.NotFound(w, r)
	}
}

type countingResponse struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingResponse) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.ResponseWriter.Write(b)
}

func hubFiles() map[string][]byte {
	return map[string][]byte{
		"model.safetensors": bytes.Repeat([]byte("w"), 300_000),
		"config.json":       []byte(`{"a":1}`),
		"onnx/model.onnx":   []byte("onnx"),
		"README.md":         []byte("# hi"),
	}
}

func hfEnv(t *testing.T, srv *httptest.Server) Env {
	return Env{Workspace: t.TempDir(), HFEndpoint: srv.URL, HTTP: srv.Client()}
}

func TestHFDownload(t *testing.T) {
	hub := &fakeHub{files: hubFiles()}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	env := hfEnv(t, srv)
	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{
		Repo: "org/model", Exclude: []string{"onnx/*"},
	}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != hfCommit {
		t.Errorf("revision %q, want %q", got.Revision, hfCommit)
	}
	want := hubFiles()
	delete(want, "onnx/model.onnx")
	if d := cmp.Diff(want, readDir(t, got.Root)); d != "" {
		t.Errorf("downloaded files (-want +got):\n%s", d)
	}
}

func TestHFResumesPartialDownload(t *testing.T) {
	hub := &fakeHub{files: hubFiles()}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	env := hfEnv(t, srv)
	weights := hub.files["model.safetensors"]
	dir := filepath.Join(env.Workspace, "hf", hfCommit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.part"), weights[:200_000], 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{
		Repo: "org/model", Include: []string{"*.safetensors"},
	}}, env)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(got.Root, "model.safetensors"))
	if !bytes.Equal(b, weights) {
		t.Fatal("resumed file differs")
	}
	if n := hub.served.Load(); n != 100_000 {
		t.Errorf("served %d bytes, want only the missing 100000", n)
	}
}

func TestHFChecksumMismatchIsPermanent(t *testing.T) {
	hub := &fakeHub{files: hubFiles()}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	env := hfEnv(t, srv)
	// A partial of the right length but wrong bytes: the hash must catch it.
	dir := filepath.Join(env.Workspace, "hf", hfCommit)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "model.safetensors.part"), bytes.Repeat([]byte("x"), 300_000), 0o644)
	_, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{
		Repo: "org/model", Include: []string{"*.safetensors"},
	}}, env)
	assertReason(t, err, workerv1.ReasonChecksum, true)
}

func TestHFGated(t *testing.T) {
	hub := &fakeHub{files: hubFiles(), gated: true, token: "hf_secret"}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	src := v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model"}}

	_, err := Fetch(t.Context(), src, hfEnv(t, srv))
	assertReason(t, err, workerv1.ReasonSourceAuth, true)
	if strings.Contains(err.Error(), "hf_secret") {
		t.Error("error message leaks the token")
	}

	env := hfEnv(t, srv)
	env.HFToken = "hf_secret"
	if _, err := Fetch(t.Context(), src, env); err != nil {
		t.Fatalf("with token: %v", err)
	}
}

func TestHFEndpointPrecedence(t *testing.T) {
	hub := &fakeHub{files: hubFiles()}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	env := hfEnv(t, srv)
	env.HFEndpoint = "http://127.0.0.1:1" // must lose to the spec's endpoint
	_, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{
		Repo: "org/model", Endpoint: srv.URL,
	}}, env)
	if err != nil {
		t.Fatal(err)
	}
}

func assertReason(t *testing.T, err error, reason string, permanent bool) {
	t.Helper()
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Reason != reason || fe.Permanent != permanent {
		t.Fatalf("error %v, want %s permanent=%t", err, reason, permanent)
	}
}

func readDir(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == ".git" {
			if d != nil && d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func asFailure(err error, fe **failure.Error) bool { return errors.As(err, fe) }

// A lazy fetch downloads only what has no placeholder (files of unknown
// size), lays out the rest as placeholders of the right size, and fetches
// them on Complete. A placeholder is never taken for a finished download
// by a later attempt in the same workspace.
func TestHFLazy(t *testing.T) {
	hub := &fakeHub{files: hubFiles()}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	env := hfEnv(t, srv)
	env.Lazy = true
	src := v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model", Exclude: []string{"onnx/*"}}}
	want := hubFiles()
	delete(want, "onnx/model.onnx")
	weights := int64(len(want["model.safetensors"]))
	var small int64
	for _, b := range want {
		small += int64(len(b))
	}
	small -= weights

	got, err := Fetch(t.Context(), src, env)
	if err != nil {
		t.Fatal(err)
	}
	if n := hub.served.Load(); n != small {
		t.Errorf("lazy fetch downloaded %d bytes, want only the %d of files of unknown size", n, small)
	}
	fi, err := os.Stat(filepath.Join(got.Root, "model.safetensors"))
	if err != nil || fi.Size() != weights {
		t.Fatalf("placeholder: %v, %v", fi, err)
	}
	sum := sha256.Sum256(want["model.safetensors"])
	if id, _ := got.FileID("model.safetensors"); id != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("file id %q", id)
	}

	// A retry (non-lazy) in the same workspace downloads the weights.
	env.Lazy = false
	retry, err := Fetch(t.Context(), src, env)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, readDir(t, retry.Root)); d != "" {
		t.Errorf("retry after a lazy fetch (-want +got):\n%s", d)
	}

	// Lazy again: every file is now complete in the download folder, so
	// nothing is fetched, and Complete has nothing to do.
	hub.served.Store(0)
	env.Lazy = true
	again, err := Fetch(t.Context(), src, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Complete(t.Context(), []string{"model.safetensors"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := hub.served.Load(); n != 0 {
		t.Errorf("downloaded %d bytes, want none", n)
	}
	if d := cmp.Diff(want, readDir(t, again.Root)); d != "" {
		t.Errorf("lazy tree (-want +got):\n%s", d)
	}
}

// Complete downloads a placeholder's file over it, with the Hub's mode.
func TestHFLazyComplete(t *testing.T) {
	hub := &fakeHub{files: hubFiles()}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	env := hfEnv(t, srv)
	env.Lazy = true
	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model"}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Complete(t.Context(), []string{"model.safetensors", "config.json"}, nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(hubFiles(), readDir(t, got.Root)); d != "" {
		t.Errorf("completed tree (-want +got):\n%s", d)
	}
	fi, err := os.Stat(filepath.Join(got.Root, "model.safetensors"))
	if err != nil || fi.Mode().Perm() != 0o644 || !fi.ModTime().Equal(got.Time) {
		t.Errorf("completed file: %v %v (time %v), want 0644 at %v", fi.Mode(), err, fi.ModTime(), got.Time)
	}
}
