// Package gitserver builds a Git repository from a fixture tree at test time
// and serves it over Git's smart HTTP protocol on 127.0.0.1.
//
// The repository is written with go-git using a fixed author and fixed commit
// times, so the same fixture always gives the same commit SHAs. It is served
// by `git http-backend` (the server half real Git hosts run) behind
// net/http/cgi, so a worker clones it exactly as it clones a production
// template repository: go-git's HTTP transport speaking smart HTTP.
package gitserver

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/packline/packline/test/fixtures"
)

// Epoch is the commit time of the first commit; each later commit is one
// hour after the previous one.
var Epoch = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// Author signs every fixture commit.
var Author = object.Signature{Name: "Fixture Bot", Email: "fixtures@packline.test"}

// Commit is one commit on the main branch. Its tree is the previous commit's
// tree with Dir copied over it, then Files (an empty value deletes the path)
// and Symlinks applied.
type Commit struct {
	// Dir is a fixture directory copied into the tree, if set.
	Dir string
	// Files are extra or replaced files, by slash path.
	Files map[string]string
	// Symlinks are symbolic links to create, path -> target.
	Symlinks map[string]string
	// Message defaults to "fixture commit N".
	Message string
	// Tags are lightweight tags pointing at this commit.
	Tags []string
	// AnnotatedTags are annotated tags pointing at this commit.
	AnnotatedTags []string
}

// Repo is the repository to build.
type Repo struct {
	// Name is the URL path, "templates" gives http://127.0.0.1:N/templates.git.
	Name    string
	Commits []Commit
}

// Options change how the repository is served.
type Options struct {
	// Username and Password, when set, are required as HTTP basic auth.
	Username, Password string
	// Wrap, when set, wraps the handler (to inject faults).
	Wrap func(http.Handler) http.Handler
}

// Server is a running Git smart-HTTP server.
type Server struct {
	// URL of the repository, http://127.0.0.1:N/<name>.git.
	URL string
	// Commits are the SHAs of the commits, in the order given.
	Commits []string
	// Times are the commit times, in the same order.
	Times []time.Time
	// GitDir is the served repository's git directory.
	GitDir string
}

// Serve builds r and serves it until the test ends. It skips the test when
// no git binary is installed, since git http-backend is the server.
func Serve(t testing.TB, r Repo, o Options) *Server {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: git http-backend serves the fixture repository")
	}
	if r.Name == "" {
		r.Name = "templates"
	}
	root := t.TempDir()
	gitDir := filepath.Join(root, "repos", r.Name+".git")
	s := &Server{GitDir: gitDir}
	s.Commits, s.Times = build(t, gitDir, filepath.Join(root, "worktree"), r.Commits)

	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Root: "/",
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Join(root, "repos"),
			"GIT_HTTP_EXPORT_ALL=1",
			// Keep the developer's and the system's git config out of the test.
			"HOME=" + home,
			"GIT_CONFIG_NOSYSTEM=1",
		},
		InheritEnv: []string{"PATH"},
	}
	if o.Username != "" || o.Password != "" {
		h = basicAuth(h, o.Username, o.Password)
	}
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/" + r.Name + ".git"
	return s
}

func basicAuth(next http.Handler, user, pass string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="fixtures"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if u != user || p != pass {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// build writes the commits with go-git: the git directory and the worktree
// are kept apart so that http-backend serves a bare-looking directory.
func build(t testing.TB, gitDir, wtDir string, commits []Commit) ([]string, []time.Time) {
	t.Helper()
	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
	repo, err := git.InitWithOptions(st, osfs.New(wtDir), git.InitOptions{
		DefaultBranch: plumbing.NewBranchReferenceName("main"),
	})
	if err != nil {
		t.Fatalf("init fixture repo: %v", err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	var times []time.Time
	for i, c := range commits {
		if c.Dir != "" {
			copyTree(t, c.Dir, wtDir)
		}
		for p, content := range c.Files {
			dst := filepath.Join(wtDir, filepath.FromSlash(p))
			if content == "" {
				if err := os.RemoveAll(dst); err != nil {
					t.Fatal(err)
				}
				continue
			}
			writeFile(t, dst, []byte(content))
		}
		for p, target := range c.Symlinks {
			dst := filepath.Join(wtDir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, dst); err != nil {
				t.Fatal(err)
			}
		}
		if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
			t.Fatalf("git add: %v", err)
		}
		when := Epoch.Add(time.Duration(i) * time.Hour)
		sig := Author
		sig.When = when
		msg := c.Message
		if msg == "" {
			msg = "fixture commit " + strconv.Itoa(i+1)
		}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: &sig, Committer: &sig, AllowEmptyCommits: true})
		if err != nil {
			t.Fatalf("git commit: %v", err)
		}
		for _, tag := range c.Tags {
			if _, err := repo.CreateTag(tag, h, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, tag := range c.AnnotatedTags {
			if _, err := repo.CreateTag(tag, h, &git.CreateTagOptions{Tagger: &sig, Message: "release " + tag}); err != nil {
				t.Fatal(err)
			}
		}
		hashes = append(hashes, h.String())
		times = append(times, when)
	}
	return hashes, times
}

func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	if err := fixtures.CopyTree(src, dst); err != nil {
		t.Fatalf("copy fixture %s: %v", src, err)
	}
}

func writeFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// FixtureDir returns test/fixtures/<name> from the module root, found by
// walking up from the test's working directory to go.mod.
func FixtureDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "test", "fixtures", filepath.FromSlash(path.Clean(name)))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}
