package guard

import "testing"

func TestIsRemote(t *testing.T) {
	tests := map[string]bool{
		"../base":                           false,
		"deployment.yaml":                   false,
		"apps/code-server/base":             false,
		"components/v1.2/ingress":           false,
		"my.dir/file.yaml":                  false, // a dotted local directory, not a host
		"https://example.com/x.yaml":        true,
		"http://127.0.0.1:8080/x":           true,
		"ssh://git@example.com/org/repo":    true,
		"file:///etc/passwd":                true,
		"git@github.com:org/repo.git//base": true,
		"github.com/org/repo/base?ref=v1":   true,
		"git::https://example.com/org/repo": true,
		"GitHub.com/org/repo":               true,
		// kustomize clones only github.com without a scheme; these are
		// local paths to it (and then missing ones).
		"gitlab.example.com/org/repo//base":   false,
		"example.com:8443/org/repo":           false,
		"../base?ref=main":                    true,
		"oci://registry.example.com/chart:v1": true,
	}
	for in, want := range tests {
		if got := IsRemote(in); got != want {
			t.Errorf("IsRemote(%q) = %v, want %v", in, got, want)
		}
	}
}
