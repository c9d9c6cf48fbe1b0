package gitrepo_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh"

	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/internal/gitrepo"
	"github.com/packline/packline/test/gitserver"
)

const reason = "SomeAuthDenied"

func secretDir(t *testing.T, files map[string]string) string {
	t.Helper()
	d := t.TempDir()
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(d, k), []byte(v), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestLoad(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := string(pem.EncodeToMemory(block))
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	knownHosts := "git.example.com " + string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	const https, sshURL = "https://git.example.com/org/repo.git", "ssh://git@git.example.com/org/repo.git"

	cases := []struct {
		name    string
		url     string
		files   map[string]string
		want    transport.AuthMethod // compared by user and password for HTTP
		wantSSH string               // user of the SSH key
		wantErr string
	}{
		{name: "no dir", url: https},
		{name: "empty Secret", url: https, files: map[string]string{}},
		{name: "token", url: https, files: map[string]string{"token": "tok\n"}, want: &githttp.BasicAuth{Username: "git", Password: "tok"}},
		{name: "token with user", url: https, files: map[string]string{"token": "tok", "username": "bot"}, want: &githttp.BasicAuth{Username: "bot", Password: "tok"}},
		{name: "username and password", url: https, files: map[string]string{"username": "alice", "password": "pw\r\n"}, want: &githttp.BasicAuth{Username: "alice", Password: "pw"}},
		{name: "ssh keys only, https url", url: https, files: map[string]string{"ssh-privatekey": key, "known_hosts": knownHosts}},
		{name: "ssh key", url: sshURL, files: map[string]string{"ssh-privatekey": key, "known_hosts": knownHosts}, wantSSH: "git"},
		{name: "ssh key with user", url: sshURL, files: map[string]string{"ssh-privatekey": key, "known_hosts": knownHosts, "username": "deploy"}, wantSSH: "deploy"},
		{name: "ssh key without known_hosts", url: sshURL, files: map[string]string{"ssh-privatekey": key}, wantErr: "no known_hosts"},
		{name: "ssh key that does not parse", url: sshURL, files: map[string]string{"ssh-privatekey": "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END OPENSSH PRIVATE KEY-----\n", "known_hosts": knownHosts},
			wantErr: "not a usable private key"},
		{name: "password only, ssh url", url: sshURL, files: map[string]string{"username": "alice", "password": "pw"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := ""
			if tc.files != nil {
				dir = secretDir(t, tc.files)
			}
			got, err := gitrepo.LoadAuth(dir, tc.url, reason)
			if tc.wantErr != "" {
				var fe *failure.Error
				if !errors.As(err, &fe) || fe.Reason != reason || !fe.Permanent || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want permanent %s saying %q", err, reason, tc.wantErr)
				}
				if strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), key) {
					t.Errorf("error quotes the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantSSH != "":
				pk, ok := got.(*gitssh.PublicKeys)
				if !ok || pk.User != tc.wantSSH || pk.HostKeyCallback == nil {
					t.Fatalf("auth = %#v, want SSH public keys of %s with a host key check", got, tc.wantSSH)
				}
			case tc.want == nil:
				if got != nil {
					t.Fatalf("auth = %v, want none", got)
				}
			default:
				ba, ok := got.(*githttp.BasicAuth)
				want := tc.want.(*githttp.BasicAuth)
				if !ok || ba.Username != want.Username || ba.Password != want.Password {
					t.Fatalf("auth = %#v, want %#v", got, want)
				}
			}
		})
	}
}

// Credentials go only to the template URL's origin. The template host
// (127.0.0.2) answers the clone's first request with a redirect to another
// host (127.0.0.1) that asks for the same credentials: go-git follows the
// redirect without them (its CheckRedirect strips every credential header
// once a hop leaves the origin, and the session drops them), so the other
// host never sees them and the clone fails as unauthenticated. Net/http
// alone would keep Authorization across this redirect to the same host
// name on another port, and to a subdomain; this test pins go-git's
// stricter behaviour, which the worker relies on.
func TestCredentialsDoNotFollowARedirectToAnotherHost(t *testing.T) {
	const password = "redirect-pw-8d1f02"
	var reached, elsewhere atomic.Int32
	other := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}},
		gitserver.Options{Username: "alice", Password: password, Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
				if r.Header.Get("Authorization") != "" || strings.Contains(r.URL.String(), password) {
					elsewhere.Add(1)
				}
				next.ServeHTTP(w, r)
			})
		}})

	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	var atOrigin atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, p, ok := r.BasicAuth(); ok && p == password {
			atOrigin.Add(1)
		}
		// other.URL is http://127.0.0.1:N/templates.git.
		http.Redirect(w, r, other.URL+strings.TrimPrefix(r.URL.RequestURI(), "/templates.git"), http.StatusFound)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	origin := "http://" + l.Addr().String() + "/templates.git"

	auth, err := gitrepo.LoadAuth(secretDir(t, map[string]string{"username": "alice", "password": password}), origin, reason)
	if err != nil {
		t.Fatal(err)
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{origin}})
	_, err = remote.ListContext(context.Background(), &git.ListOptions{Auth: auth})
	if !errors.Is(err, transport.ErrAuthenticationRequired) {
		t.Errorf("listing through the redirect: err = %v, want authentication required (the other host got no credentials)", err)
	}
	if atOrigin.Load() == 0 || reached.Load() == 0 {
		t.Errorf("origin saw the credentials %d times, the other host was reached %d times: the test proves nothing", atOrigin.Load(), reached.Load())
	}
	if n := elsewhere.Load(); n > 0 {
		t.Errorf("the other host received the credentials %d times", n)
	}
	if err != nil && strings.Contains(err.Error(), password) {
		t.Errorf("error leaks the password: %v", err)
	}
}
