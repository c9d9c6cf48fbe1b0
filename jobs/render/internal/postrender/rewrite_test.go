package postrender

import (
	"testing"

	"github.com/packline/packline/api/v1alpha1"
)

func TestRewrite(t *testing.T) {
	rw := []v1alpha1.RegistryRewrite{
		{From: "docker.io", To: "mirror.example.com/dockerhub"},
		{From: "ghcr.io/org", To: "mirror.example.com/ghcr-org/"},
		{From: "quay.io", To: "should-not-win.example.com"},
		{From: "quay.io", To: "second.example.com"},
	}
	tests := map[string]string{
		"nginx":                            "mirror.example.com/dockerhub/library/nginx",
		"nginx:1.27":                       "mirror.example.com/dockerhub/library/nginx:1.27",
		"vllm/vllm-openai:v0.6.4":          "mirror.example.com/dockerhub/vllm/vllm-openai:v0.6.4",
		"docker.io/codercom/code-server:4": "mirror.example.com/dockerhub/codercom/code-server:4",
		"ghcr.io/org/app@sha256:abc":       "mirror.example.com/ghcr-org/app@sha256:abc",
		"ghcr.io/other/app:1":              "ghcr.io/other/app:1",
		"ghcr.io/organisation/app:1":       "ghcr.io/organisation/app:1", // whole segments only
		"docker.io2/x:1":                   "docker.io2/x:1",
		"localhost/x:1":                    "localhost/x:1",
		"registry.local:5000/x:1":          "registry.local:5000/x:1",
		"quay.io/x:1":                      "should-not-win.example.com/x:1", // first match wins
	}
	for in, want := range tests {
		if got := Rewrite(in, rw); got != want {
			t.Errorf("Rewrite(%q) = %q, want %q", in, got, want)
		}
	}
}
