package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/regtest"
)

// stallCeiling is how long a test waits for a stalled worker before it
// reports that nothing bounded the stall. With a 1 s idle timeout the
// slowest case (a registry retried six times by oras) ends in about 13 s.
const stallCeiling = 60 * time.Second

// stall lets a handler's response through up to limit bytes, then holds
// it, neither sending nor closing, until release or the client leaves.
type stall struct {
	http.ResponseWriter
	left    int
	release <-chan struct{}
	req     *http.Request
}

var errStalled = errors.New("stalled on purpose")

func (s *stall) Write(b []byte) (int, error) {
	if s.left <= 0 {
		s.hold()
		return 0, errStalled
	}
	if len(b) <= s.left {
		s.left -= len(b)
		return s.ResponseWriter.Write(b)
	}
	n, _ := s.ResponseWriter.Write(b[:s.left])
	s.left = 0
	s.Flush()
	s.hold()
	return n, errStalled
}

func (s *stall) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *stall) hold() {
	select {
	case <-s.release:
	case <-s.req.Context().Done():
	}
}

// stallWhen wraps h: requests matching stalls get through limit response
// bytes, then hang.
func stallWhen(h http.Handler, release <-chan struct{}, limit int, match func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if match(r) {
			w = &stall{ResponseWriter: w, left: limit, release: release, req: r}
		}
		h.ServeHTTP(w, r)
	})
}

// runBounded runs the worker and waits at most stallCeiling for it. On the
// ceiling it releases the stalls so the run can end, and fails the test.
func runBounded(t *testing.T, command string, doc any, letGo func()) (int, workerv1.Result, time.Duration) {
	t.Helper()
	encoded, err := workerv1.EncodeSpec(doc)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "termination-log")
	t.Setenv(workerv1.EnvSpec, encoded)
	t.Setenv(EnvTerminationLog, log)
	t.Setenv(EnvWorkspace, t.TempDir())
	start := time.Now()
	done := make(chan int, 1)
	go func() { done <- run([]string{command}) }()
	var code int
	select {
	case code = <-done:
	case <-time.After(stallCeiling):
		letGo()
		code = <-done
		t.Errorf("a stalled transfer held the worker for over %s (it only ended when the server let go)", stallCeiling)
	}
	took := time.Since(start)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("no termination message: %v", err)
	}
	res, err := workerv1.ParseResult(b)
	if err != nil {
		t.Fatalf("termination message %s: %v", b, err)
	}
	return code, res, took
}

// TestStalledServersFailRetryably: a server that stops sending mid-body
// (Hugging Face, an HTTP file, a Git pack for an artifact or a template,
// an OCI blob) or never answers a registry upload fails the run as
// retryable, within a bound set by the idle timeout (1 s here, 60 s by
// default), instead of holding the pod until the Job's deadline.
func TestStalledServersFailRetryably(t *testing.T) {
	t.Setenv(EnvIdleTimeout, "1s")
	t.Setenv(EnvSourceAuthDir, filepath.Join(t.TempDir(), "none"))
	reg := regtest.StartWith(t, regtest.Options{})
	release := make(chan struct{})
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }

	big := bytes.Repeat([]byte("w"), 256<<10)
	files := httptest.NewServer(stallWhen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(big)
	}), release, 64<<10, func(*http.Request) bool { return true }))
	t.Cleanup(files.Close)

	hf, err := hfserver.Start(map[string]hfserver.Repo{"org/m": {Files: map[string][]byte{"model.safetensors": big}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hf.Close() })
	hfStall := httptest.NewServer(stallWhen(hf, release, 64<<10, func(r *http.Request) bool {
		return strings.Contains(r.URL.Path, "/resolve/")
	}))
	t.Cleanup(hfStall.Close)

	packStalls := func(h http.Handler) http.Handler {
		return stallWhen(h, release, 200, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/git-upload-pack") })
	}
	git := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{
		{Files: map[string]string{"model/w.gguf": string(big)}},
	}}, gitserver.Options{Wrap: packStalls})
	tmpl := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{
		{Dir: gitserver.FixtureDir(t, "templates"), Files: map[string]string{"padding.bin": string(big)}},
	}}, gitserver.Options{Wrap: packStalls})

	// The registry behind a proxy that stalls blob downloads mid-body and
	// never answers a manifest upload.
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: reg.Host})
	regStall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:"):
			proxy.ServeHTTP(&stall{ResponseWriter: w, left: 64 << 10, release: release, req: r}, r)
		case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/"):
			(&stall{req: r, release: release}).hold()
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(regStall.Close)
	// Cleanups run last-in first-out: the held handlers are let go before
	// the servers wait for them to return.
	t.Cleanup(letGo)
	regStallHost := strings.TrimPrefix(regStall.URL, "http://")

	// Something to pull: pushed straight to the registry.
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "w.gguf"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSourceVolumeDir, vol)
	volume := v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc"}}
	target := workerv1.Target{Repository: reg.Host + "/stall/model", Tag: "v1", PlainHTTP: true}
	if code, res, _ := runBounded(t, "artifact", workerv1.Artifact{Source: volume, Format: v1alpha1.FormatModelKit, Target: target}, letGo); code != 0 {
		t.Fatalf("seeding the registry: %+v", res.Error)
	}

	artifact := func(src v1alpha1.ArtifactSource) workerv1.Artifact {
		return workerv1.Artifact{Source: src, Format: v1alpha1.FormatModelKit,
			Target: workerv1.Target{Repository: reg.Host + "/stall/out", Tag: "v1", PlainHTTP: true}}
	}
	cases := []struct {
		name    string
		command string
		doc     any
	}{
		{"http file", "artifact", artifact(v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: files.URL + "/w.bin"}})},
		{"hugging face file", "artifact", artifact(v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/m", Endpoint: hfStall.URL}})},
		{"git pack", "artifact", artifact(v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: git.URL}})},
		{"template git pack", "claim", workerv1.Claim{Name: "x", Namespace: "team-a", Target: target,
			Template: v1alpha1.ClaimTemplateSpec{Source: v1alpha1.TemplateSource{URL: tmpl.URL, Ref: "main", Path: "apps/code-server/base"}}}},
		{"oci blob pull", "artifact", artifact(v1alpha1.ArtifactSource{OCI: &v1alpha1.OCISource{Reference: regStallHost + "/stall/model:v1", PlainHTTP: true}})},
		{"registry manifest push", "artifact", workerv1.Artifact{Source: volume, Format: v1alpha1.FormatModelKit,
			Target: workerv1.Target{Repository: regStallHost + "/stall/pushed", Tag: "v1", PlainHTTP: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, res, took := runBounded(t, tc.command, tc.doc, letGo)
			if code == 0 || !res.Failed() || res.Error.Permanent {
				t.Fatalf("exit %d, %+v; want a retryable failure", code, res.Error)
			}
			t.Logf("%s after %s: %s", res.Error.Reason, took.Round(100*time.Millisecond), res.Error.Message)
		})
	}
}
