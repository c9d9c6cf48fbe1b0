package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/regtest"
)

// hubProxy stands in front of the Hub fixture and counts the bytes of
// file downloads (resolve/…), the ones a re-import must not repeat; model
// info is metadata and not counted.
func hubProxy(t testing.TB, hubURL string) (string, *atomic.Int64) {
	t.Helper()
	u, _ := url.Parse(hubURL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/resolve/") {
			w = &countingWriter{ResponseWriter: w, n: &n}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// shard is distinct, incompressible-enough content of n bytes.
func shard(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

// Re-imports of a Hugging Face model, each in a fresh workspace, with the
// registry and the Hub behind byte-counting proxies: an unchanged re-run
// and an edited tag fetch and send no file; a new commit that changes one
// shard fetches and sends that shard only, and gives the digest a run from
// scratch gives; a second repository on the same registry mounts every
// layer from the first.
func TestIncrementalHuggingFace(t *testing.T) {
	reg, up := regtest.Proxy(t, regtest.Start(t))
	const size = 256 << 10
	files := map[string][]byte{
		"model-00001-of-00003.safetensors": shard(1, size),
		"model-00002-of-00003.safetensors": shard(2, size),
		"model-00003-of-00003.safetensors": shard(3, size),
		"config.json":                      []byte(`{"model_type":"inc"}`),
		"tokenizer.json":                   []byte(`{"version":"1.0"}`),
		"README.md":                        []byte("# inc\n"),
	}
	var total int64
	for _, b := range files {
		total += int64(len(b))
	}
	hub, err := hfserver.Start(map[string]hfserver.Repo{"org/model": {Files: files}})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	hubURL, down := hubProxy(t, hub.URL)

	job := func(repo, tag string, previous ...string) workerv1.Artifact {
		return workerv1.Artifact{
			Source:   v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model", Endpoint: hubURL}},
			Format:   v1alpha1.FormatModelKit,
			Target:   workerv1.Target{Repository: reg + "/" + repo, Tag: tag, PlainHTTP: true},
			Previous: previous,
		}
	}
	runCounted := func(t *testing.T, a workerv1.Artifact) (res resultT, downloaded, uploaded int64) {
		t.Helper()
		down.Store(0)
		up.Reset()
		code, r := runWorker(t, a)
		if code != 0 || r.Failed() {
			t.Fatalf("exit %d, error %+v", code, r.Error)
		}
		return resultT{Digest: r.Digest, Reference: r.Reference, Size: r.Size}, down.Load(), up.Uploaded()
	}

	first, d, u := runCounted(t, job("inc/model", "v1"))
	if d != total || u < total {
		t.Fatalf("first run downloaded %d and uploaded %d bytes, want %d and at least that", d, total, total)
	}

	t.Run("unchanged", func(t *testing.T) {
		res, d, u := runCounted(t, job("inc/model", "v1"))
		if res.Digest != first.Digest {
			t.Errorf("digest %s, want %s", res.Digest, first.Digest)
		}
		// Not even the manifest: the tag already points at it.
		if d != 0 || u != 0 {
			t.Errorf("downloaded %d and uploaded %d bytes, want none", d, u)
		}
	})

	t.Run("edited tag, from the last reference", func(t *testing.T) {
		res, d, u := runCounted(t, job("inc/model", "v2", first.Reference))
		if res.Digest != first.Digest || d != 0 || u > res.Size {
			t.Errorf("digest %s (want %s), downloaded %d, uploaded %d bytes (want 0, ≤%d)", res.Digest, first.Digest, d, u, res.Size)
		}
	})

	t.Run("a layer deleted from the registry is fetched and sent again", func(t *testing.T) {
		repo, _ := registry.Repository(reg+"/inc/model", registry.Options{PlainHTTP: true})
		m := pushedManifest(t, repo, first.Digest)
		gone := m.Layers[0]
		if err := repo.Blobs().Delete(t.Context(), gone); err != nil {
			t.Fatal(err)
		}
		res, d, u := runCounted(t, job("inc/model", "v1"))
		if res.Digest != first.Digest {
			t.Errorf("digest %s, want %s", res.Digest, first.Digest)
		}
		if d == 0 || d > size || u < gone.Size || u > gone.Size+8<<10 {
			t.Errorf("downloaded %d and uploaded %d bytes, want that layer's file (≤%d) and the %d-byte layer", d, u, size, gone.Size)
		}
		if ok, err := repo.Blobs().Exists(t.Context(), gone); err != nil || !ok {
			t.Errorf("layer %s not back (%v)", gone.Digest, err)
		}
	})

	changed := maps.Clone(files)
	changed["model-00002-of-00003.safetensors"] = shard(42, size)
	hub.Set("org/model", hfserver.Repo{Files: changed})
	var updated resultT

	t.Run("one shard changed", func(t *testing.T) {
		res, d, u := runCounted(t, job("inc/model", "v1"))
		updated = res
		if res.Digest == first.Digest {
			t.Fatal("a new shard gave the same digest")
		}
		if d != size {
			t.Errorf("downloaded %d bytes, want the changed shard's %d", d, size)
		}
		// The shard's layer (its tar: header, bytes, trailer), the config
		// and the manifest; nothing of the other shards.
		if u < size || u > size+16<<10 {
			t.Errorf("uploaded %d bytes, want the one shard's layer (%d bytes and a few KiB)", u, size)
		}
		scratch, _, _ := runCounted(t, job("inc/scratch", "v1"))
		if scratch.Digest != res.Digest {
			t.Errorf("incremental push %s differs from a push from scratch %s", res.Digest, scratch.Digest)
		}
	})

	t.Run("cross-repository mount", func(t *testing.T) {
		if updated.Reference == "" {
			t.Skip("needs the previous subtest")
		}
		res, d, u := runCounted(t, job("inc/mirror", "v1", updated.Reference))
		if res.Digest != updated.Digest {
			t.Errorf("digest %s, want %s", res.Digest, updated.Digest)
		}
		// Config and manifest only: every layer was mounted.
		if d != 0 || u > 8<<10 {
			t.Errorf("downloaded %d and uploaded %d bytes, want 0 and only config and manifest", d, u)
		}
		repo, _ := registry.Repository(reg+"/inc/mirror", registry.Options{PlainHTTP: true})
		m := pushedManifest(t, repo, "v1")
		for _, l := range m.Layers {
			if ok, err := repo.Blobs().Exists(t.Context(), l); err != nil || !ok {
				t.Errorf("layer %s is not in the mirror repository (%v)", l.Digest, err)
			}
		}
	})
}

// runUploaded runs the worker on a, which must succeed, and returns its
// result and the bytes uploaded through the registry proxy.
func runUploaded(t *testing.T, up *regtest.Counter, a workerv1.Artifact) (resultT, int64) {
	t.Helper()
	up.Reset()
	code, res := runWorker(t, a)
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, error %+v", code, res.Error)
	}
	return resultT{Digest: res.Digest, Reference: res.Reference, Size: res.Size}, up.Uploaded()
}

type resultT struct {
	Digest, Reference string
	Size              int64
}

// A volume has no identity of its own: its files' stat fingerprints stand
// in. Re-run in a fresh workspace, an unchanged volume sends no layer; one
// rewritten file sends its layer only.
func TestIncrementalVolume(t *testing.T) {
	reg, up := regtest.Proxy(t, regtest.Start(t))
	vol := t.TempDir()
	const size = 128 << 10
	for name, b := range map[string][]byte{
		"m/a.safetensors": shard(1, size), "m/b.safetensors": shard(2, size), "m/config.json": []byte("{}"),
	} {
		p := filepath.Join(vol, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvSourceVolumeDir, vol)
	a := workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc", Path: "m"}},
		Format: v1alpha1.FormatModelPack, Target: workerv1.Target{Repository: reg + "/vol/model", Tag: "v1", PlainHTTP: true}}
	first, u := runUploaded(t, up, a)
	if u < 2*size {
		t.Fatalf("first run uploaded %d bytes", u)
	}
	again, u := runUploaded(t, up, a)
	if again.Digest != first.Digest || u != 0 {
		t.Errorf("unchanged volume: digest %s (want %s), uploaded %d bytes (want none)", again.Digest, first.Digest, u)
	}
	if err := os.WriteFile(filepath.Join(vol, "m", "b.safetensors"), shard(9, size), 0o644); err != nil {
		t.Fatal(err)
	}
	third, u := runUploaded(t, up, a)
	if third.Digest == first.Digest || u < size || u > size+16<<10 {
		t.Errorf("one file rewritten: digest %s (first %s), uploaded %d bytes, want its layer (%d bytes and a few KiB)", third.Digest, first.Digest, u, size)
	}
}

// A Git commit names every file by its blob id. A new commit that changes
// one weight file is cloned again (a shallow clone cannot skip files), but
// only that file's layer is sent, and the digest is a from-scratch push's.
func TestIncrementalGitCommit(t *testing.T) {
	reg, up := regtest.Proxy(t, regtest.Start(t))
	// Over push's in-memory limit (1 MiB), whose digest is known before
	// any upload: the streamed path is the one that needs the blob ids.
	const size = 3 << 19
	git := gitserver.Serve(t, gitserver.Repo{Name: "weights", Commits: []gitserver.Commit{
		{Files: map[string]string{
			"m/a.safetensors": string(shard(1, size)), "m/b.safetensors": string(shard(2, size)), "m/config.json": "{}",
		}, Tags: []string{"v1"}},
		{Files: map[string]string{"m/b.safetensors": string(shard(9, size))}, Tags: []string{"v2"}},
	}}, gitserver.Options{})
	t.Setenv(EnvSourceAuthDir, filepath.Join(t.TempDir(), "no-auth"))
	job := func(repo, ref string, previous ...string) workerv1.Artifact {
		return workerv1.Artifact{Source: v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: git.URL, Ref: ref, Path: "m"}},
			Format:   v1alpha1.FormatModelPack,
			Target:   workerv1.Target{Repository: reg + "/" + repo, Tag: "v1", PlainHTTP: true},
			Previous: previous}
	}
	first, u := runUploaded(t, up, job("git/model", "v1"))
	if u < 2*size {
		t.Fatalf("first run uploaded %d bytes, want both files", u)
	}
	second, u := runUploaded(t, up, job("git/model", "v2", first.Reference))
	if second.Digest == first.Digest {
		t.Fatal("a changed file gave the same digest")
	}
	// b's layer, the config and the manifest; a's layer was in the registry.
	if u < size || u > size+16<<10 {
		t.Errorf("new commit uploaded %d bytes, want the changed file's layer (%d bytes and a few KiB)", u, size)
	}
	scratch, _ := runUploaded(t, up, job("git/scratch", "v2"))
	if scratch.Digest != second.Digest {
		t.Errorf("incremental push %s differs from a push from scratch %s", second.Digest, scratch.Digest)
	}
}

// An HTTP download without a stated sha256 has no name before it is made,
// so a re-run downloads it again; but the download's sha256 names its
// files, so nothing the registry has is uploaded again, for a plain file
// or an archive's files.
func TestIncrementalHTTPWithoutSHA256(t *testing.T) {
	reg, up := regtest.Proxy(t, regtest.Start(t))
	const size = 3 << 19 // over push's in-memory limit
	weights := shard(5, size)
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for name, b := range map[string][]byte{"model/a.safetensors": shard(6, size), "model/b.safetensors": shard(7, size)} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	tw.Close()
	var downloaded atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := weights
		if strings.HasSuffix(r.URL.Path, ".tar") {
			body = archive.Bytes()
		}
		downloaded.Add(int64(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	for _, file := range []string{"model.safetensors", "model.tar"} {
		t.Run(file, func(t *testing.T) {
			a := workerv1.Artifact{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/" + file}},
				Format: v1alpha1.FormatModelPack, Target: workerv1.Target{Repository: reg + "/http/" + strings.ReplaceAll(file, ".", "-"), Tag: "v1", PlainHTTP: true}}
			var first workerv1.Result
			for run := range 2 {
				up.Reset()
				downloaded.Store(0)
				code, res := runWorker(t, a)
				if code != 0 || res.Failed() {
					t.Fatalf("run %d: exit %d, error %+v", run, code, res.Error)
				}
				if downloaded.Load() == 0 {
					t.Fatalf("run %d downloaded nothing", run)
				}
				if run == 0 {
					first = res
					if up.Uploaded() < size {
						t.Fatalf("first run uploaded %d bytes", up.Uploaded())
					}
					continue
				}
				// The tag already names the same manifest: nothing at all.
				if res.Digest != first.Digest || up.Uploaded() != 0 {
					t.Errorf("re-run: digest %s (want %s), uploaded %d bytes (want none)", res.Digest, first.Digest, up.Uploaded())
				}
			}
		})
	}
}

// Sources that name their revision before any fetch: a Git ref resolved
// with ls-remote (a branch, or an annotated tag peeled to its commit) and
// an HTTP file with a stated sha256. Re-run in a fresh workspace, the
// earlier manifest is re-used whole: no pack is fetched from the Git
// server, no file downloaded, nothing uploaded.
func TestIncrementalRevisionKnownUpFront(t *testing.T) {
	reg, up := regtest.Proxy(t, regtest.Start(t))
	var fetched atomic.Int64
	git := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{{
		Files:         map[string]string{"model.safetensors": strings.Repeat("w", 64<<10), "config.json": "{}"},
		AnnotatedTags: []string{"v1"},
	}}}, gitserver.Options{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
				w = &countingWriter{ResponseWriter: w, n: &fetched}
			}
			h.ServeHTTP(w, r)
		})
	}})
	body := shard(7, 64<<10)
	sum := sha256.Sum256(body)
	file := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(int64(len(body)))
		w.Write(body)
	}))
	defer file.Close()

	for _, tc := range []struct {
		name string
		src  v1alpha1.ArtifactSource
	}{
		{"git branch", v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: git.URL, Ref: "main"}}},
		{"git annotated tag", v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: git.URL, Ref: "v1"}}},
		{"http sha256", v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: file.URL + "/model.gguf", SHA256: hex.EncodeToString(sum[:])}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvSourceAuthDir, filepath.Join(t.TempDir(), "no-auth"))
			a := workerv1.Artifact{Source: tc.src, Format: v1alpha1.FormatModelKit,
				Target: workerv1.Target{Repository: reg + "/known/" + strings.ReplaceAll(tc.name, " ", "-"), Tag: "v1", PlainHTTP: true}}
			fetched.Store(0)
			code, first := runWorker(t, a)
			if code != 0 || first.Failed() || fetched.Load() == 0 {
				t.Fatalf("first run: exit %d, %+v, fetched %d bytes", code, first.Error, fetched.Load())
			}
			for _, tag := range []string{"v1", "v2"} {
				a.Target.Tag = tag
				fetched.Store(0)
				up.Reset()
				code, res := runWorker(t, withPrevious(a, first.Reference))
				if code != 0 || res.Failed() {
					t.Fatalf("re-run as %s: exit %d, %+v", tag, code, res.Error)
				}
				if res.Digest != first.Digest || res.SourceRevision != first.SourceRevision {
					t.Errorf("re-run as %s: %s at %s, want %s at %s", tag, res.Digest, res.SourceRevision, first.Digest, first.SourceRevision)
				}
				if first.ImageDigest == "" || res.ImageReference != first.ImageReference {
					t.Errorf("re-run as %s: image view %q, want the first run's %q", tag, res.ImageReference, first.ImageReference)
				}
				// v1 is already tagged; v2 sends the manifest only.
				if fetched.Load() != 0 || up.Uploaded() > res.Size {
					t.Errorf("re-run as %s fetched %d and uploaded %d bytes, want 0 and at most the %d-byte manifest", tag, fetched.Load(), up.Uploaded(), res.Size)
				}
			}
		})
	}
}

func withPrevious(a workerv1.Artifact, refs ...string) workerv1.Artifact {
	a.Previous = refs
	return a
}
