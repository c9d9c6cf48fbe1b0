package render_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/test/gitserver"
)

// A private template (spec.source.secretRef) clones with the credential
// from the mounted Secret's files; without them, or with wrong ones, the
// render fails permanently with TemplateAuthDenied, pointing at
// spec.source.secretRef, and no message carries the password. A public
// template never uses what is mounted, and a URL with credentials in it
// is refused before any request.
func TestPrivateTemplate(t *testing.T) {
	const password = "tpl-pw-5c1e7a0d93"
	locked := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}},
		gitserver.Options{Username: "alice", Password: password})
	host := inProcessRegistry(t)
	secretDir := func(files map[string]string) string {
		d := t.TempDir()
		for k, v := range files {
			if err := os.WriteFile(filepath.Join(d, k), []byte(v), 0o400); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	type want struct {
		reason  string
		message string
	}
	cases := []struct {
		name    string
		private bool
		url     string
		files   map[string]string
		want    *want
	}{
		{name: "username and password", private: true, files: map[string]string{"username": "alice", "password": password + "\n"}},
		{name: "token", private: true, files: map[string]string{"username": "alice", "token": password}},
		{name: "no credential", private: true,
			want: &want{workerv1.ReasonTemplateAuth, `spec.source.secretRef: the Secret "tpl-repo" of the ClaimTemplate (in the manager's template namespace) does not exist or holds no credential`}},
		{name: "ssh keys for an https url", private: true, files: map[string]string{"ssh-privatekey": "not a key", "known_hosts": "x"},
			want: &want{workerv1.ReasonTemplateAuth, `it needs "token", or "username" and "password"`}},
		{name: "wrong password", private: true, files: map[string]string{"username": "alice", "password": "wrong-" + password},
			want: &want{workerv1.ReasonTemplateAuth, "refused the credentials of the ClaimTemplate's spec.source.secretRef"}},
		{name: "public template ignores a mounted Secret", files: map[string]string{"username": "alice", "password": password},
			want: &want{workerv1.ReasonTemplateAuth, "has no spec.source.secretRef"}},
		{name: "credentials in the url", private: true, files: map[string]string{"username": "alice", "password": password},
			url:  strings.Replace(locked.URL, "http://", "http://alice:"+password+"@", 1),
			want: &want{workerv1.ReasonInvalidSpec, "embeds credentials: put them in a Secret of the template namespace and name it in spec.source.secretRef"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := locked.URL
			if tc.url != "" {
				url = tc.url
			}
			c := pushClaim(url, host, "claims/team-a/"+strings.ReplaceAll(tc.name, " ", "-"), "v1", nil, t)
			if tc.private {
				c.Template.Source.SecretRef = &corev1.LocalObjectReference{Name: "tpl-repo"}
			}
			res, err := render.Run(context.Background(), c, render.Options{WorkDir: t.TempDir(), AuthDir: secretDir(tc.files)})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("render: %v", err)
				}
				if res.Digest == "" || res.SourceRevision != locked.Commits[0] {
					t.Fatalf("result = %+v, want a digest of commit %s", res, locked.Commits[0])
				}
				return
			}
			var fe *failure.Error
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a classified failure", err)
			}
			if fe.Reason != tc.want.reason || !fe.Permanent {
				t.Errorf("failure = %s permanent=%v, want %s permanent", fe.Reason, fe.Permanent, tc.want.reason)
			}
			if !strings.Contains(err.Error(), tc.want.message) {
				t.Errorf("message %q does not say %q", err, tc.want.message)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("message leaks the password: %q", err)
			}
		})
	}
}
