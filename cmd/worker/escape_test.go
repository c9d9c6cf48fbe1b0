package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"oras.land/oras-go/v2/errdef"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/regtest"
)

// TestArtifactSymlinkEscapes runs the worker on a Git repository (smart
// HTTP) whose symlink points at the folder where the pod's credentials are
// mounted. Neither spec.source.git.path nor a Kitfile path may pack them:
// the run fails as InvalidSpec and nothing reaches the registry.
func TestArtifactSymlinkEscapes(t *testing.T) {
	host := regtest.Start(t)
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "password"), []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSourceAuthDir, filepath.Join(t.TempDir(), "none"))
	srv := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{{
		Files: map[string]string{"model/w.gguf": "weights"},
		// A relative target: the fixture writer rewrites absolute ones.
		Symlinks: map[string]string{"mnt": strings.Repeat("../", 32) + filepath.Dir(creds)},
	}}}, gitserver.Options{})
	rel := filepath.Base(creds)

	cases := map[string]workerv1.Artifact{
		"git path": {Source: v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: srv.URL, Path: "mnt/" + rel}}},
		"kitfile path": {Source: v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: srv.URL}},
			Kitfile: "model:\n  path: model/w.gguf\ndocs:\n  - path: mnt/" + rel + "/password\n"},
	}
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			a.Format = v1alpha1.FormatModelKit
			a.Target = workerv1.Target{Repository: host + "/escape/" + filepath.Base(t.Name()), Tag: "v1", PlainHTTP: true}
			code, res := runWorker(t, a)
			if code == 0 || !res.Failed() || res.Error.Reason != workerv1.ReasonInvalidSpec || !res.Error.Permanent {
				t.Fatalf("exit %d, result %+v; want a permanent InvalidSpec", code, res)
			}
			repo, err := registry.Repository(a.Target.Repository, registry.Options{PlainHTTP: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := repo.Resolve(t.Context(), "v1"); !errors.Is(err, errdef.ErrNotFound) {
				t.Errorf("resolving the tag: %v, want not found", err)
			}
		})
	}
}
