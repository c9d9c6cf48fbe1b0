package source

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
)

// authLog records the Authorization header of each request a server saw.
type authLog struct {
	mu   sync.Mutex
	seen map[string]string // path -> Authorization
}

func (l *authLog) record(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]string{}
	}
	l.seen[r.URL.Path] = r.Header.Get("Authorization")
}

func (l *authLog) get() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for k, v := range l.seen {
		out[k] = v
	}
	return out
}

// TestHFTokenStaysWithItsOrigin: the Hub (one loopback server) redirects
// downloads to a "CDN" on another port of the same host, another origin,
// as the real Hub redirects to its CDN. The token reaches the Hub on every
// request, including a redirect that stays on the Hub, and never the CDN.
// (Go's client alone keeps Authorization across a redirect to the same
// host name on another port.)
func TestHFTokenStaysWithItsOrigin(t *testing.T) {
	const token = "hf_originTokenValue123"
	var cdnLog, hubLog authLog
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cdnLog.record(r)
		hubFilesServe(w, r, strings.TrimPrefix(r.URL.Path, "/cdn/"))
	}))
	t.Cleanup(cdn.Close)
	hub := &fakeHub{files: hubFiles(), gated: true, token: token}
	hubSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hubLog.record(r)
		const resolve = "/org/model/resolve/" + hfCommit + "/"
		switch name := strings.TrimPrefix(r.URL.Path, resolve); {
		case r.Header.Get("Authorization") != "Bearer "+token:
			http.Error(w, "gated", http.StatusUnauthorized)
		case name == "config.json":
			// A redirect that stays on the Hub keeps the token.
			http.Redirect(w, r, "/moved/config.json", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/moved/"):
			hubFilesServe(w, r, strings.TrimPrefix(r.URL.Path, "/moved/"))
		case name != r.URL.Path:
			http.Redirect(w, r, cdn.URL+"/cdn/"+name, http.StatusFound)
		default:
			hub.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(hubSrv.Close)

	env := Env{Workspace: t.TempDir(), HFEndpoint: hubSrv.URL, HFToken: token, HTTP: &http.Client{}}
	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model"}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if files := readDir(t, got.Root); len(files) != len(hubFiles()) {
		t.Errorf("fetched %d files, want %d", len(files), len(hubFiles()))
	}
	cdnSeen := cdnLog.get()
	if len(cdnSeen) == 0 {
		t.Fatal("nothing was downloaded from the CDN: the test proves nothing")
	}
	for p, auth := range cdnSeen {
		if auth != "" {
			t.Errorf("the CDN (another origin) got Authorization %q for %s", auth, p)
		}
	}
	for p, auth := range hubLog.get() {
		if auth != "Bearer "+token {
			t.Errorf("the Hub got Authorization %q for %s, want the token", auth, p)
		}
	}
}

func hubFilesServe(w http.ResponseWriter, r *http.Request, name string) {
	b, ok := hubFiles()[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(b)
}
