package source_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/internal/gitrepo"
	"github.com/packline/packline/jobs/render/source"
	"github.com/packline/packline/test/gitserver"
)

func fixtureRepo(t *testing.T, o gitserver.Options) *gitserver.Server {
	t.Helper()
	return gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{
		{Dir: gitserver.FixtureDir(t, "templates"), Tags: []string{"v1.0.0"}},
		{Files: map[string]string{"apps/code-server/base/NOTES.txt": "second commit\n"}, AnnotatedTags: []string{"v1.1.0"},
			Symlinks: map[string]string{"apps/code-server/base/passwd.yaml": "/etc/passwd"}},
	}}, o)
}

func TestFetchRefs(t *testing.T) {
	srv := fixtureRepo(t, gitserver.Options{})
	first, second := srv.Commits[0], srv.Commits[1]
	tests := []struct {
		ref       string
		commit    string
		isSHA     bool
		wantNotes bool
	}{
		{ref: "", commit: second, wantNotes: true}, // defaults to main
		{ref: "main", commit: second, wantNotes: true},
		{ref: "refs/heads/main", commit: second, wantNotes: true},
		{ref: "v1.0.0", commit: first},
		{ref: "v1.1.0", commit: second, wantNotes: true}, // annotated tag peeled to its commit
		{ref: first, commit: first, isSHA: true},
		{ref: first[:12], commit: first, isSHA: true},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			rev, snap, err := source.Fetch(context.Background(), source.Options{URL: srv.URL, Ref: tc.ref, Dir: filepath.Join(t.TempDir(), "src")})
			if err != nil {
				t.Fatal(err)
			}
			if rev.Commit != tc.commit || rev.IsSHA != tc.isSHA {
				t.Errorf("commit %s sha=%v, want %s sha=%v", rev.Commit, rev.IsSHA, tc.commit, tc.isSHA)
			}
			wantTime := gitserver.Epoch
			if tc.commit == second {
				wantTime = srv.Times[1]
			}
			if !rev.Time.Equal(wantTime) {
				t.Errorf("time %s, want %s", rev.Time, wantTime)
			}
			if _, ok := snap.Files["apps/code-server/base/deployment.yaml"]; !ok {
				t.Error("deployment.yaml missing from snapshot")
			}
			if _, ok := snap.Files["apps/code-server/base/NOTES.txt"]; ok != tc.wantNotes {
				t.Errorf("NOTES.txt present=%v, want %v", ok, tc.wantNotes)
			}
			if _, ok := snap.Files["apps/code-server/base/passwd.yaml"]; ok {
				t.Error("symlink was copied as a file")
			}
			if tc.wantNotes && !snap.Symlinks["apps/code-server/base/passwd.yaml"] {
				t.Error("symlink not recorded")
			}
		})
	}
}

func TestFetchFailures(t *testing.T) {
	open := fixtureRepo(t, gitserver.Options{})
	locked := fixtureRepo(t, gitserver.Options{Username: "alice", Password: "s3cret"})
	broken := fixtureRepo(t, gitserver.Options{Wrap: func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "upstream down", http.StatusServiceUnavailable)
		})
	}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/templates.git"
	l.Close()

	authDir := func(files map[string]string) string {
		d := t.TempDir()
		for k, v := range files {
			if err := os.WriteFile(filepath.Join(d, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	type want struct {
		Reason    string
		Permanent bool
	}
	tests := []struct {
		name    string
		url     string
		ref     string
		authDir string
		want    *want
	}{
		{name: "missing branch", url: open.URL, ref: "no-such-branch", want: &want{workerv1.ReasonSourceNotFound, true}},
		{name: "missing sha", url: open.URL, ref: "0123456789abcdef0123456789abcdef01234567", want: &want{workerv1.ReasonSourceNotFound, true}},
		{name: "missing repo", url: strings.TrimSuffix(open.URL, "templates.git") + "nope.git", want: &want{workerv1.ReasonSourceNotFound, true}},
		{name: "no credentials", url: locked.URL, want: &want{workerv1.ReasonSourceAuth, true}},
		{name: "wrong password", url: locked.URL, authDir: authDir(map[string]string{"username": "alice", "password": "nope\n"}), want: &want{workerv1.ReasonSourceAuth, true}},
		{name: "right password", url: locked.URL, authDir: authDir(map[string]string{"username": "alice", "password": "s3cret\n"})},
		{name: "token", url: locked.URL, authDir: authDir(map[string]string{"username": "alice", "token": "s3cret"})},
		{name: "503", url: broken.URL, want: &want{workerv1.ReasonSourceFailed, false}},
		{name: "connection refused", url: refused, want: &want{workerv1.ReasonSourceFailed, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := gitrepo.LoadAuth(tc.authDir, tc.url, workerv1.ReasonSourceAuth)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = source.Fetch(context.Background(), source.Options{URL: tc.url, Ref: tc.ref, Dir: filepath.Join(t.TempDir(), "src"), Auth: auth})
			var got *want
			if err != nil {
				var fe *failure.Error
				if !errors.As(err, &fe) {
					t.Fatalf("unclassified error: %v", err)
				}
				got = &want{fe.Reason, fe.Permanent}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("failure (-want +got):\n%s\nerr: %v", diff, err)
			}
			if err != nil && contains(err.Error(), "s3cret") {
				t.Errorf("error leaks the credential: %v", err)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
