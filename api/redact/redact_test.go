package redact

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestString(t *testing.T) {
	cases := []struct {
		in      string
		secrets []string // must not survive
		keep    []string // must survive
	}{
		{`git https://oauth2:MARKERgitpw@git.example.com/org/repo.git@main: authentication required`,
			[]string{"MARKERgitpw", "oauth2"}, []string{"https://", "@git.example.com/org/repo.git@main", "authentication required"}},
		{`Get "https://bucket.s3.amazonaws.com/m.tar.gz?X-Amz-Credential=AKIAX&X-Amz-Signature=MARKERsig": dial tcp: connection refused`,
			[]string{"MARKERsig", "AKIAX"}, []string{"https://bucket.s3.amazonaws.com/m.tar.gz?", "connection refused"}},
		{`url: http://u:p%40MARKER@127.0.0.1:5000/x#frag-MARKER`, []string{"MARKER"}, []string{"127.0.0.1:5000/x"}},
		{"Authorization: Bearer hf_MARKERtoken123\nnext line", []string{"MARKER"}, []string{"Authorization: ", "next line"}},
		{`header map[Authorization:[Basic dXNlcjpNQVJLRVI=]]`, []string{"dXNlcjpNQVJLRVI"}, []string{"header map[Authorization"}},
		{`sent bearer eyJhbGciOiJSUzI1NiJ9.MARKER.sig to the registry`, []string{"MARKER"}, []string{"to the registry"}},
		{`token hf_AbCdEfGhIjKlMnOp leaked`, []string{"hf_AbCdEfGhIjKlMnOp"}, []string{"leaked"}},
		{`form password=MARKER&user=x`, []string{"MARKER"}, []string{"user=x"}},
		{`{"auths":{"r.example":{"auth":"MARKERauth","password":"MARK\"ER"}}}`, []string{"MARKERauth", `MARK\"ER`}, []string{`"auths"`}},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nMARKER\n-----END OPENSSH PRIVATE KEY-----", []string{"MARKER"}, nil},
		{`Basic realm="fixtures"`, nil, []string{`Basic realm="fixtures"`}},
		{`pushing 127.0.0.1:5000/x/y@sha256:abc: 503`, nil, []string{`127.0.0.1:5000/x/y@sha256:abc: 503`}},
	}
	for _, tc := range cases {
		got := String(tc.in)
		for _, s := range tc.secrets {
			if strings.Contains(got, s) {
				t.Errorf("String(%q) = %q, still holds %q", tc.in, got, s)
			}
		}
		for _, k := range tc.keep {
			if !strings.Contains(got, k) {
				t.Errorf("String(%q) = %q, lost %q", tc.in, got, k)
			}
		}
	}
}

// TestURLError checks the error Go's HTTP client really returns: it hides a
// URL's password itself, but keeps the user name and the query string.
func TestURLError(t *testing.T) {
	_, err := http.Get("http://MARKERuser:MARKERpw@127.0.0.1:1/f?X-Amz-Signature=MARKERsig")
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("want a *url.Error, got %v", err)
	}
	if !strings.Contains(err.Error(), "MARKERsig") {
		t.Fatalf("the premise changed: %q no longer shows the query", err)
	}
	if got := Error(err); strings.Contains(got, "MARKER") {
		t.Errorf("Error() = %q", got)
	}
}

func TestAdd(t *testing.T) {
	t.Cleanup(Reset)
	Add("s3cr3t/value+", "abc") // "abc" is too short to register
	in := "said s3cr3t/value+ then s3cr3t%2Fvalue%2B then czNjcjN0L3ZhbHVlKw== and abc"
	got := String(in)
	if strings.Contains(got, "s3cr3t") || strings.Contains(got, "czNjcjN0L3ZhbHVlKw") {
		t.Errorf("String = %q", got)
	}
	if !strings.HasSuffix(got, "and abc") {
		t.Errorf("String = %q, redacted a short value", got)
	}
}

func TestWriter(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	for _, part := range []string{"GET https://u:MARK", "ER@h/x?sig=MARKER ok\nsecond ", "Bearer MARKERMARKER"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(b.String(), "second") {
		t.Errorf("an unterminated line was written before Close: %q", b.String())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); strings.Contains(got, "MARKER") || !strings.Contains(got, " ok\nsecond Bearer ") {
		t.Errorf("wrote %q", got)
	}
}

// TestPublic holds the form every recorded source URL takes: no userinfo,
// query or fragment, whatever the scheme or shape.
func TestPublic(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:token@github.com/org/repo.git", "https://github.com/org/repo.git"},
		{"https://user:tok@host/repo.git?token=x", "https://host/repo.git"},
		{"https://example.com/w.gguf?sig=secret#frag", "https://example.com/w.gguf"},
		{"https://user:pass@example.com/m.tar.gz?X-Amz-Signature=abc#frag", "https://example.com/m.tar.gz"},
		{"https://huggingface.co/org/model", "https://huggingface.co/org/model"},
		{"https://host/path@v1", "https://host/path@v1"}, // an '@' in the path is no userinfo
		{"ssh://git@github.com/org/repo.git", "ssh://github.com/org/repo.git"},
		{"git@github.com:org/repo.git", "github.com:org/repo.git"},
		{"file:///tmp/repo", "file:///tmp/repo"},
		{"", ""},
	} {
		if diff := cmp.Diff(tc.want, Public(tc.in)); diff != "" {
			t.Errorf("Public(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:tok@host/repo.git?token=x#f", "https://" + Mask + "@host/repo.git?" + Mask},
		{"https://host/repo.git", "https://host/repo.git"},
		{"not a url", "not a url"},
	} {
		if diff := cmp.Diff(tc.want, URL(tc.in)); diff != "" {
			t.Errorf("URL(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}
