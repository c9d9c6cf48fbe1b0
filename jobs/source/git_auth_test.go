package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/test/gitserver"
)

// TestGitAuthOverSmartHTTP clones over git's smart HTTP with the Secret's
// files as credentials: username/password and token work, a wrong password
// and no credentials at all are permanent SourceAuthDenied failures.
func TestGitAuthOverSmartHTTP(t *testing.T) {
	srv := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{
		{Files: map[string]string{"model/w.gguf": "weights"}},
	}}, gitserver.Options{Username: "x-access-token", Password: "s3cret"})

	secret := func(files map[string]string) string {
		dir := t.TempDir()
		for k, v := range files {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	cases := []struct {
		name     string
		auth     string
		wantAuth bool // a permanent SourceAuthDenied
	}{
		{"basic", secret(map[string]string{"username": "x-access-token", "password": "s3cret\n"}), false},
		{"token with user", secret(map[string]string{"token": "s3cret", "username": "x-access-token"}), false},
		{"wrong password", secret(map[string]string{"username": "x-access-token", "password": "nope"}), true},
		{"no secret", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := Env{Workspace: t.TempDir(), SourceAuthDir: tc.auth}
			got, err := fetchGit(context.Background(), v1alpha1.GitSource{URL: srv.URL, Ref: "main"}, env)
			if tc.wantAuth {
				var fe *failure.Error
				if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonSourceAuth || !fe.Permanent {
					t.Fatalf("error = %v, want a permanent %s", err, workerv1.ReasonSourceAuth)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != srv.Commits[0] {
				t.Errorf("revision = %s, want %s", got.Revision, srv.Commits[0])
			}
			b, err := os.ReadFile(filepath.Join(got.Root, "model", "w.gguf"))
			if err != nil || string(b) != "weights" {
				t.Errorf("cloned content = %q, %v", b, err)
			}
		})
	}
}
