package procnode

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The log endpoint answers tailLines and limitBytes as the kubelet does:
// the last lines, then at most the first limitBytes of them. The manager's
// progress reads (status.progress) send both.
func TestContainerLogsTailAndLimit(t *testing.T) {
	dir := t.TempDir()
	podDir := filepath.Join(dir, "pods", "ns_p_uid1")
	if err := os.MkdirAll(podDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(podDir, "worker.log"), []byte("one\ntwo\nthree\nfour\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &Node{o: Options{Dir: dir}}
	cases := []struct {
		query string
		code  int
		want  string
	}{
		{"", http.StatusOK, "one\ntwo\nthree\nfour\n"},
		{"?tailLines=2", http.StatusOK, "three\nfour\n"},
		{"?tailLines=2&limitBytes=7", http.StatusOK, "three\nf"},
		{"?limitBytes=3", http.StatusOK, "one"},
		{"?limitBytes=0", http.StatusBadRequest, ""},
		{"?limitBytes=x", http.StatusBadRequest, ""},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/p/worker"+c.query, nil)
		req.SetPathValue("namespace", "ns")
		req.SetPathValue("pod", "p")
		req.SetPathValue("container", "worker")
		rec := httptest.NewRecorder()
		n.containerLogs(rec, req)
		if rec.Code != c.code {
			t.Errorf("%s: status %d, want %d", c.query, rec.Code, c.code)
			continue
		}
		if c.code == http.StatusOK {
			if diff := cmp.Diff(c.want, rec.Body.String()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", c.query, diff)
			}
		}
	}
}
