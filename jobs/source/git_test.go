package source

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// gitRepo makes a local repository with two commits on main and a tag on
// the first; it returns its file:// URL and the two commit SHAs.
func gitRepo(t *testing.T) (string, string, string) {
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	commit := func(files map[string]string) plumbing.Hash {
		for name, body := range files {
			p := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(body), 0o644)
			wt.Add(name)
		}
		h, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@t", When: time.Unix(1, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := commit(map[string]string{"model/w.gguf": "v1", "README.md": "r"})
	if _, err := repo.CreateTag("v1", first, nil); err != nil {
		t.Fatal(err)
	}
	second := commit(map[string]string{"model/w.gguf": "v2"})
	return "file://" + dir, first.String(), second.String()
}

func TestGit(t *testing.T) {
	url, first, second := gitRepo(t)
	cases := []struct {
		ref, path string
		wantRev   string
		want      map[string][]byte
	}{
		{"main", "", second, map[string][]byte{"model/w.gguf": []byte("v2"), "README.md": []byte("r")}},
		{"v1", "model", first, map[string][]byte{"w.gguf": []byte("v1")}},
		{first, "", first, map[string][]byte{"model/w.gguf": []byte("v1"), "README.md": []byte("r")}},
		// The rule a ClaimTemplate's ref follows (see gitrepo.Pick): a full
		// ref name and an abbreviated SHA.
		{"refs/tags/v1", "model", first, map[string][]byte{"w.gguf": []byte("v1")}},
		{first[:12], "model", first, map[string][]byte{"w.gguf": []byte("v1")}},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: url, Ref: tc.ref, Path: tc.path}}, Env{Workspace: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != tc.wantRev {
				t.Errorf("revision %s, want %s", got.Revision, tc.wantRev)
			}
			if d := cmp.Diff(tc.want, readDir(t, got.Root)); d != "" {
				t.Errorf("files (-want +got):\n%s", d)
			}
		})
	}
	t.Run("missing ref", func(t *testing.T) {
		_, err := Fetch(t.Context(), v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: url, Ref: "nope"}}, Env{Workspace: t.TempDir()})
		assertReason(t, err, workerv1.ReasonSourceNotFound, true)
	})
}
