package source

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/push"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

func TestCopyOCI(t *testing.T) {
	host := regtest.Start(t)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "w.gguf"), []byte("weights"), 0o644)
	// An executable: the copy is byte for byte (same manifest digest, so
	// the same layers), so its mode is kept too.
	os.Mkdir(filepath.Join(root, "src"), 0o755)
	os.WriteFile(filepath.Join(root, "src", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	files, _ := kitfile.Scan(root)
	src, _ := registry.Repository(host+"/src/model", registry.Options{PlainHTTP: true})
	pushed, _, err := push.Push(t.Context(), src, root, kitfile.Generate(files), push.Options{Tag: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := registry.Repository(host+"/dst/model", registry.Options{PlainHTTP: true})
	got, err := CopyOCI(t.Context(), v1alpha1.OCISource{Reference: host + "/src/model:v1", PlainHTTP: true}, t.TempDir(), dst, "copied")
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != pushed.Digest {
		t.Errorf("copied %s, pushed %s", got.Digest, pushed.Digest)
	}
	if d, err := dst.Resolve(t.Context(), "copied"); err != nil || d.Digest != pushed.Digest {
		t.Errorf("dst tag resolves to %v (%v)", d.Digest, err)
	}
	_, err = CopyOCI(t.Context(), v1alpha1.OCISource{Reference: host + "/src/model:missing", PlainHTTP: true}, t.TempDir(), dst, "x")
	assertReason(t, err, workerv1.ReasonSourceNotFound, true)
}

// A copy talks to two registries: a refusal by the source is
// SourceAuthDenied (the pull Secret's to fix), a refusal by the target
// RegistryAuthDenied (the push Secret's), both permanent.
func TestCopyOCIRefusalNamesTheRightSide(t *testing.T) {
	open := regtest.Start(t)
	locked := regtest.StartWith(t, regtest.Options{Users: map[string]string{"alice": "pw"}}).Host
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "w.gguf"), []byte("weights"), 0o644)
	files, _ := kitfile.Scan(root)
	pub, _ := registry.Repository(open+"/src/model", registry.Options{PlainHTTP: true})
	if _, _, err := push.Push(t.Context(), pub, root, kitfile.Generate(files), push.Options{Tag: "v1"}); err != nil {
		t.Fatal(err)
	}
	// Source refuses (no pull credentials).
	dst, _ := registry.Repository(open+"/dst/model", registry.Options{PlainHTTP: true})
	_, err := CopyOCI(t.Context(), v1alpha1.OCISource{Reference: locked + "/src/model:v1", PlainHTTP: true}, t.TempDir(), dst, "x")
	assertReason(t, err, workerv1.ReasonSourceAuth, true)
	// Target refuses (no push credentials).
	lockedDst, _ := registry.Repository(locked+"/dst/model", registry.Options{PlainHTTP: true})
	_, err = CopyOCI(t.Context(), v1alpha1.OCISource{Reference: open + "/src/model:v1", PlainHTTP: true}, t.TempDir(), lockedDst, "x")
	assertReason(t, err, workerv1.ReasonRegistryAuth, true)
}

// An OCI source on the target's own registry is mounted, not pulled and
// pushed: through a byte-counting proxy, the copy sends only its manifest,
// and so does a re-run.
func TestCopyOCIMountsOnOneRegistry(t *testing.T) {
	host, count := regtest.Proxy(t, regtest.Start(t))
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "w.gguf"), make([]byte, 64<<10), 0o644)
	files, _ := kitfile.Scan(root)
	src, _ := registry.Repository(host+"/src/model", registry.Options{PlainHTTP: true})
	pushed, _, err := push.Push(t.Context(), src, root, kitfile.Generate(files), push.Options{Tag: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := registry.Repository(host+"/mirror/model", registry.Options{PlainHTTP: true})
	for range 2 {
		count.Reset()
		got, err := CopyOCI(t.Context(), v1alpha1.OCISource{Reference: host + "/src/model:v1", PlainHTTP: true}, t.TempDir(), dst, "v1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Digest != pushed.Digest || count.Uploaded() > got.Size {
			t.Errorf("copied %s (want %s) sending %d bytes, want at most the %d-byte manifest", got.Digest, pushed.Digest, count.Uploaded(), got.Size)
		}
	}
}
