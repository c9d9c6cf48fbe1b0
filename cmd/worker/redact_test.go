package main

import (
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/regtest"
)

// marker is in every credential below, and nowhere else: no host, path,
// repository or file name contains it.
const marker = "MARKER"

// Credentials as the pod gets them: env.valueFrom and Secret files.
const (
	hfToken     = "hf_" + marker + "hfTok0123456789"
	gitPassword = marker + "-git-password-77"
	urlPassword = marker + "-url-password-55"
	dockerPass  = marker + "-docker-password-99"
	presigned   = "X-Amz-Credential=AKIA" + marker + "cred%2F20240101&X-Amz-Signature=" + marker + "sig0123abcdef"
)

// captureStderr points os.Stderr at a file for the rest of the test (the
// worker wraps whatever os.Stderr is when it starts) and returns a
// function that reads what was written.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	orig := os.Stderr
	os.Stderr = f
	t.Cleanup(func() { os.Stderr = orig; f.Close() })
	return func() string {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func writeFiles(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestNoCredentialInMessagesOrLogs runs every source and every failure we
// can provoke with credentials that carry a marker: a Hugging Face token,
// a Git Secret's password, a password in a Git or HTTP URL, docker config
// passwords for pulling, pushing and deleting, and a pre-signed query
// string. Neither the termination message nor the worker's log may hold
// the marker.
func TestNoCredentialInMessagesOrLogs(t *testing.T) {
	reg := regtest.StartWith(t, regtest.Options{Users: map[string]string{"alice": "the-right-one"}})
	dockerDir := writeFiles(t, map[string]string{"config.json": `{"auths":{"` + reg.Host + `":{"auth":"` +
		base64.StdEncoding.EncodeToString([]byte("alice:"+dockerPass)) + `"}}}`})
	t.Setenv(workerv1.EnvDockerConfig, dockerDir)
	t.Setenv(EnvPullAuthDir, dockerDir)
	t.Setenv(workerv1.EnvHFToken, hfToken)
	gitSecret := writeFiles(t, map[string]string{"username": "x-access-token", "password": gitPassword + "\n"})
	t.Setenv(EnvSourceAuthDir, gitSecret)
	vol := writeFiles(t, map[string]string{"w.gguf": "weights"})
	t.Setenv(EnvSourceVolumeDir, vol)

	hf, err := hfserver.Start(map[string]hfserver.Repo{"org/tiny": hfserver.TinyModel()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hf.Close() })
	dead := deadURL(t)
	// The Hub answers model info, then redirects the download to a
	// pre-signed URL on a host that is down.
	hfRedirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/resolve/") {
			http.Redirect(w, r, dead+"/blob?"+presigned, http.StatusFound)
			return
		}
		hf.ServeHTTP(w, r)
	}))
	t.Cleanup(hfRedirect.Close)
	// A file server that refuses a signature, or redirects to a dead host.
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/denied.tar.gz":
			http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		case "/moved.tar.gz":
			http.Redirect(w, r, dead+"/m.tar.gz?"+r.URL.RawQuery, http.StatusFound)
		default:
			w.Write([]byte("not an archive"))
		}
	}))
	t.Cleanup(files.Close)
	git := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{
		{Files: map[string]string{"model/w.gguf": "weights"}},
	}}, gitserver.Options{Username: "x-access-token", Password: "the-right-one"})
	tmpl := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{
		{Dir: gitserver.FixtureDir(t, "templates")},
	}}, gitserver.Options{Username: "x-access-token", Password: "the-right-one"})
	withPassword := func(u string) string {
		return strings.Replace(u, "http://", "http://x-access-token:"+urlPassword+"@", 1)
	}

	target := workerv1.Target{Repository: reg.Host + "/leak/test", Tag: "v1", PlainHTTP: true}
	artifact := func(src v1alpha1.ArtifactSource) workerv1.Artifact {
		return workerv1.Artifact{Source: src, Format: v1alpha1.FormatModelKit, Target: target}
	}
	hfSrc := func(endpoint string) v1alpha1.ArtifactSource {
		return v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/tiny", Endpoint: endpoint}}
	}
	httpSrc := func(u string) v1alpha1.ArtifactSource {
		return v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: u}}
	}
	gitSrc := func(u string) v1alpha1.ArtifactSource {
		return v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: u, Ref: "main"}}
	}
	claim := func(u string) workerv1.Claim {
		return workerv1.Claim{Name: "x", Namespace: "team-a", Target: target,
			Template: v1alpha1.ClaimTemplateSpec{Source: v1alpha1.TemplateSource{URL: u, Ref: "main", Path: "apps/code-server/base"}}}
	}

	cases := []struct {
		name    string
		command string
		doc     any
	}{
		{"hf fetched, push denied", "artifact", artifact(hfSrc(hf.URL))},
		{"hf endpoint down", "artifact", artifact(hfSrc(dead))},
		{"hf endpoint with password down", "artifact", artifact(hfSrc(withPassword(dead)))},
		{"hf redirect to pre-signed dead host", "artifact", artifact(hfSrc(hfRedirect.URL))},
		{"http pre-signed denied", "artifact", artifact(httpSrc(files.URL + "/denied.tar.gz?" + presigned))},
		{"http pre-signed host down", "artifact", artifact(httpSrc(dead + "/m.tar.gz?" + presigned))},
		{"http pre-signed redirect to dead host", "artifact", artifact(httpSrc(files.URL + "/moved.tar.gz?" + presigned))},
		{"http pre-signed checksum mismatch", "artifact", workerv1.Artifact{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{
			URL: files.URL + "/m.bin?" + presigned, SHA256: strings.Repeat("0", 64)}}, Target: target}},
		{"http password in url, host down", "artifact", artifact(httpSrc(withPassword(dead) + "/m.tar.gz"))},
		{"git secret password denied", "artifact", artifact(gitSrc(git.URL))},
		{"git password in url denied", "artifact", artifact(gitSrc(withPassword(git.URL)))},
		{"git password in url, host down", "artifact", artifact(gitSrc(withPassword(dead) + "/models.git"))},
		{"oci source pull denied", "artifact", artifact(v1alpha1.ArtifactSource{OCI: &v1alpha1.OCISource{Reference: reg.Host + "/src/model:v1", PlainHTTP: true}})},
		{"volume fetched, push denied", "artifact", artifact(v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "pvc"}})},
		{"claim secret password denied", "claim", claim(tmpl.URL)},
		{"claim password in url denied", "claim", claim(withPassword(tmpl.URL))},
		{"claim password in url, host down", "claim", claim(withPassword(dead) + "/templates.git")},
		{"delete denied", "delete", workerv1.Delete{Reference: reg.Host + "/leak/test@sha256:" + strings.Repeat("a", 64), Target: target}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureStderr(t)
			code, res := runCommand(t, tc.command, tc.doc)
			if code == 0 || !res.Failed() {
				t.Fatalf("exit %d, %+v: every case here must fail", code, res)
			}
			msg, _ := workerv1.MarshalResult(res)
			if strings.Contains(string(msg), marker) {
				t.Errorf("termination message holds a credential: %s", msg)
			}
			out := logs()
			if !strings.Contains(out, "failed: "+res.Error.Reason) {
				t.Errorf("the log did not reach the capture: %q", out)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, marker) {
					t.Errorf("worker log holds a credential: %s", line)
				}
			}
		})
	}
}
