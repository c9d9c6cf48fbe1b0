package sandbox

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/packline/packline/test/fixtures"
)

// GitRepo is a fixture tree committed once and served over Git's smart
// HTTP protocol by `git http-backend`, for `make demo`. (test/gitserver is
// the richer testing.TB version the unit and e2e tests use.)
type GitRepo struct {
	URL    string
	Commit string
	srv    *http.Server
}

// ServeGitRepo commits tree (a folder) into a repository under dir and
// serves it on address ip (loopback, or the real node's bridge gateway:
// Sandbox.ServeIP) as <URL>/<name>.git.
func ServeGitRepo(ip, dir, name, tree string) (*GitRepo, error) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git http-backend serves the template repository: %w", err)
	}
	repos := filepath.Join(dir, "repos")
	gitDir, wt := filepath.Join(repos, name+".git"), filepath.Join(dir, "worktree")
	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
	repo, err := git.InitWithOptions(st, osfs.New(wt), git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")})
	if err != nil {
		return nil, err
	}
	if err := fixtures.CopyTree(tree, wt); err != nil {
		return nil, err
	}
	w, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	if err := w.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return nil, err
	}
	// A fixed author and time give the same commit SHA on every run.
	sig := &object.Signature{Name: "Fixture Bot", Email: "fixtures@packline.test", When: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
	h, err := w.Commit("templates", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, err
	}
	handler := &cgi.Handler{
		Path: gitBin, Args: []string{"http-backend"}, Root: "/",
		Env:        []string{"GIT_PROJECT_ROOT=" + repos, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1"},
		InheritEnv: []string{"PATH"},
	}
	g := &GitRepo{URL: "http://" + ln.Addr().String() + "/" + name + ".git", Commit: h.String(),
		srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

// Close stops serving.
func (g *GitRepo) Close() error { return g.srv.Close() }
