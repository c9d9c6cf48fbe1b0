package push

import (
	"errors"
	"net/http/httptest"
	"net/url"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/registry"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

// inProcess is go-containerregistry's registry, for fast tests only.
func inProcess(t *testing.T) string {
	srv := httptest.NewServer(ggcr.New())
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u.Host
}

func TestDeterministic(t *testing.T) {
	for _, tc := range []struct {
		name string
		host func(*testing.T) string
	}{
		{"in-process", inProcess},
		{"distribution", func(t *testing.T) string { return regtest.Start(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.host(t)
			for _, f := range []v1alpha1.PackFormat{v1alpha1.FormatModelKit, v1alpha1.FormatModelPack} {
				// Two copies of the same files in different folders, no
				// shared cache, two repositories. The times are the
				// same, as a source sets them (a ModelPack records them).
				a, b := t.TempDir(), t.TempDir()
				writeTree(t, a, modelFiles)
				writeTree(t, b, modelFiles)
				sameTimes(t, a)
				sameTimes(t, b)
				d1, _, err := pushTree(t, repoAt(t, host, "det/one", registry.Options{}), a, Options{Format: f, Tag: "v1"})
				if err != nil {
					t.Fatal(err)
				}
				d2, _, err := pushTree(t, repoAt(t, host, "det/two", registry.Options{}), b, Options{Format: f, Tag: "v1"})
				if err != nil {
					t.Fatal(err)
				}
				if d1 != d2 {
					t.Errorf("%s: same inputs gave %s and %s", f, d1, d2)
				}
			}
		})
	}
}

func TestRepushUploadsNoBlobBytes(t *testing.T) {
	host, count := regtest.Proxy(t, regtest.Start(t))
	root, cacheDir := t.TempDir(), t.TempDir()
	writeTree(t, root, modelFiles)
	repo := repoAt(t, host, "repush/model", registry.Options{})
	o := Options{Tag: "v1", CacheDir: cacheDir}

	first, st1, err := pushTree(t, repo, root, o)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Uploaded != st1.Layers || st1.Layers == 0 {
		t.Fatalf("first push: %+v", st1)
	}
	count.Reset()
	desc, st2, err := Push(t.Context(), repo, root, generated(t, root), o)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != first {
		t.Fatalf("re-push digest %s, want %s", desc.Digest, first)
	}
	if st2.Uploaded != 0 || st2.Skipped != st1.Layers {
		t.Errorf("re-push stats %+v, want all %d layers skipped", st2, st1.Layers)
	}
	// Only the manifest itself may be sent again (re-tagging).
	if got := count.Uploaded(); got > desc.Size {
		t.Errorf("re-push sent %d body bytes, more than the %d-byte manifest", got, desc.Size)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, modelFiles)

	t.Run("wrong credentials are permanent", func(t *testing.T) {
		r := regtest.StartWith(t, regtest.Options{Users: map[string]string{"alice": "right"}})
		cfg := dockerConfig(t, r.Host, "alice", "wrong")
		_, _, err := pushTree(t, repoAt(t, r.Host, "auth/model", registry.Options{DockerConfigDir: cfg}), root, Options{Tag: "v1"})
		assertFailure(t, err, workerv1.ReasonRegistryAuth, true)
	})
	t.Run("right credentials work", func(t *testing.T) {
		r := regtest.StartWith(t, regtest.Options{Users: map[string]string{"alice": "right"}})
		cfg := dockerConfig(t, r.Host, "alice", "right")
		if _, _, err := pushTree(t, repoAt(t, r.Host, "auth/model", registry.Options{DockerConfigDir: cfg}), root, Options{Tag: "v1"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("registry down is retryable", func(t *testing.T) {
		r := regtest.StartWith(t, regtest.Options{})
		r.Stop()
		_, _, err := pushTree(t, repoAt(t, r.Host, "down/model", registry.Options{}), root, Options{Tag: "v1"})
		assertFailure(t, err, workerv1.ReasonRegistryFailed, false)
	})
}

func assertFailure(t *testing.T, err error, reason string, permanent bool) {
	t.Helper()
	var fe *failure.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not classified", err)
	}
	if fe.Reason != reason || fe.Permanent != permanent {
		t.Fatalf("got %s permanent=%t (%v), want %s permanent=%t", fe.Reason, fe.Permanent, err, reason, permanent)
	}
}
