package plugin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The page's guard: only the printed URL opens it, only the page itself
// may POST, and a rebound DNS name is refused.
func TestUIGuard(t *testing.T) {
	g := &uiGuard{host: "127.0.0.1:4242", token: "tok", csrf: "csrf"}
	var reached string
	h := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = r.URL.Path }))
	same := func(r *http.Request) {
		r.Header.Set("Origin", "http://127.0.0.1:4242")
		r.Header.Set(uiCSRFHeader, "csrf")
		r.Header.Set("Content-Type", "application/json")
	}
	for _, tc := range []struct {
		name, method, host, path string
		edit                     func(*http.Request)
		code                     int
		reached                  string
	}{
		{"the page", "GET", "127.0.0.1:4242", "/s/tok/", nil, 200, "/"},
		{"an API read", "GET", "127.0.0.1:4242", "/s/tok/api/status", nil, 200, "/api/status"},
		{"no token", "GET", "127.0.0.1:4242", "/", nil, 404, ""},
		{"a wrong token", "GET", "127.0.0.1:4242", "/s/tak/api/status", nil, 404, ""},
		{"a token as a prefix of another", "GET", "127.0.0.1:4242", "/s/tokx/", nil, 404, ""},
		{"a rebound DNS name", "GET", "evil.example:4242", "/s/tok/api/status", nil, 403, ""},
		{"a POST from the page", "POST", "127.0.0.1:4242", "/s/tok/api/claims", same, 200, "/api/claims"},
		{"a POST from another origin", "POST", "127.0.0.1:4242", "/s/tok/api/claims", func(r *http.Request) {
			same(r)
			r.Header.Set("Origin", "https://evil.example")
		}, 403, ""},
		{"a POST without Origin", "POST", "127.0.0.1:4242", "/s/tok/api/claims", func(r *http.Request) {
			same(r)
			r.Header.Del("Origin")
		}, 403, ""},
		{"a POST without the CSRF token", "POST", "127.0.0.1:4242", "/s/tok/api/claims", func(r *http.Request) {
			same(r)
			r.Header.Del(uiCSRFHeader)
		}, 403, ""},
		{"a POST with a wrong CSRF token", "POST", "127.0.0.1:4242", "/s/tok/api/claims", func(r *http.Request) {
			same(r)
			r.Header.Set(uiCSRFHeader, "csrg")
		}, 403, ""},
		{"a form POST (no preflight)", "POST", "127.0.0.1:4242", "/s/tok/api/claims", func(r *http.Request) {
			same(r)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}, 415, ""},
		{"another method", "DELETE", "127.0.0.1:4242", "/s/tok/api/claims", same, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached = ""
			r := httptest.NewRequest(tc.method, "http://"+tc.host+tc.path, strings.NewReader("{}"))
			r.Host = tc.host
			if tc.edit != nil {
				tc.edit(r)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code || reached != tc.reached {
				t.Errorf("got %d reaching %q, want %d reaching %q (%s)", w.Code, reached, tc.code, tc.reached, w.Body.String())
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if w.Header().Get("Referrer-Policy") != "no-referrer" {
				t.Error("the URL's token could leave in a Referer")
			}
		})
	}
}

// Two runs never share a token, and the URL holds it.
func TestUIGuardTokens(t *testing.T) {
	a, err := newUIGuard("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newUIGuard("127.0.0.1:1")
	if a.token == b.token || a.csrf == b.csrf || a.token == a.csrf || len(a.token) < 40 {
		t.Fatalf("tokens %q %q %q", a.token, b.token, a.csrf)
	}
	if a.url() != "http://127.0.0.1:1/s/"+a.token+"/" {
		t.Fatal(a.url())
	}
}

// RunView reads status.progress, whatever its shape, and its step (where
// a Claim says clone, render, push or deliver) when they are there, and
// nothing when they are not.
func TestRunView(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "m", "generation": int64(2)},
		"status": map[string]any{"phase": "Running", "attempts": int64(1), "observedGeneration": int64(2),
			"progress":   map[string]any{"bytesDone": int64(10), "bytesTotal": int64(100), "step": "push"},
			"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Running", "message": "importing"}, "junk"}},
	}}
	r := RunView(u)
	if r.Phase != "Running" || r.Ready != "False" || r.Reason != "Running" || r.Attempts != 1 || r.ObservedGeneration != 2 || r.Step != "push" || len(r.Conditions) != 1 {
		t.Fatalf("%+v", r)
	}
	if p, _ := r.Progress.(map[string]any); p["bytesTotal"] != int64(100) {
		t.Fatalf("progress %v", r.Progress)
	}
	bare := RunView(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "n"}, "status": map[string]any{"progress": "garbage-typed", "attempts": "x"}}})
	if bare.Ready != "Unknown" || bare.Progress != "garbage-typed" || bare.Step != "" || bare.Delivery != nil || bare.Attempts != 0 {
		t.Fatalf("%+v", bare)
	}
}
