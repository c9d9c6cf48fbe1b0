package build

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/packline/packline/test/gitserver"
)

// TestOfflineCutsTheNetwork runs krusty itself, without the guard, on
// kustomizations that fetch a remote file and clone a remote base from
// loopback servers. Run plainly (the control) they reach the servers;
// inside offline no request arrives, and the attempted URL is reported.
func TestOfflineCutsTheNetwork(t *testing.T) {
	var httpHits, gitHits atomic.Int64
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpHits.Add(1)
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: remote\n"))
	}))
	t.Cleanup(files.Close)
	git := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{{Files: map[string]string{
		"base/kustomization.yaml": "resources:\n  - cm.yaml\n",
		"base/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cloned\n",
	}}}}, gitserver.Options{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gitHits.Add(1); h.ServeHTTP(w, r) })
	}})

	cases := []struct {
		name          string
		kustomization string
		hits          *atomic.Int64
		reportsURL    bool
	}{
		{"remote file", "resources:\n  - " + files.URL + "/x.yaml\n", &httpHits, true},
		{"remote git base", "resources:\n  - " + git.URL + "//base?ref=main\n", &gitHits, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			build := func() error {
				fs := filesys.MakeFsInMemory()
				if err := fs.WriteFile("/o/kustomization.yaml", []byte(tc.kustomization)); err != nil {
					t.Fatal(err)
				}
				_, err := krusty.MakeKustomizer(Options()).Run(fs, "/o")
				return err
			}
			build() // the control: krusty on its own goes out
			if tc.hits.Swap(0) == 0 {
				t.Fatal("control: krusty did not reach the loopback server, so this test proves nothing")
			}
			tried, err := offline(build)
			if n := tc.hits.Load(); n != 0 {
				t.Errorf("offline build reached the server: %d requests", n)
			}
			if err == nil {
				t.Error("offline build succeeded")
			}
			if tc.reportsURL && !strings.HasPrefix(tried, files.URL) {
				t.Errorf("tried = %q, want the remote file's URL", tried)
			}
			if _, ok := http.DefaultTransport.(*http.Transport); !ok {
				t.Errorf("http.DefaultTransport was not restored: %T", http.DefaultTransport)
			}
		})
	}
}
