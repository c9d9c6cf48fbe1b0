package render_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/jobs/render/source"
)

const baseKustomization = "apps/code-server/base/kustomization.yaml"

// withFiles is the fixture snapshot with files replaced or added.
func withFiles(fx fixture, files map[string]string, symlinks ...string) *source.Snapshot {
	s := &source.Snapshot{Files: maps.Clone(fx.snap.Files), Symlinks: map[string]bool{}}
	for k, v := range files {
		s.Files[k] = []byte(v)
	}
	for _, l := range symlinks {
		s.Symlinks[l] = true
	}
	return s
}

func baseWith(extra string) string {
	return `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml
  - service.yaml
  - pvc.yaml
` + extra
}

// TestSandboxRefuses checks each way out of the sandbox is refused with a
// permanent failure and a message that names the problem.
func TestSandboxRefuses(t *testing.T) {
	fx := snapshot(t)
	marker := filepath.Join(t.TempDir(), "exec-ran")
	script := filepath.Join(t.TempDir(), "fn.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		files   map[string]string
		links   []string
		path    string // template source path, when not the default
		reason  string
		message string
	}{
		{
			name:   "remote base by URL",
			files:  map[string]string{baseKustomization: baseWith("  - https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.0.0\n")},
			reason: workerv1.ReasonTemplateRejected, message: "remote bases and files are not allowed",
		},
		{
			name:   "remote base without scheme",
			files:  map[string]string{baseKustomization: baseWith("  - github.com/kubernetes-sigs/kustomize/examples/helloWorld?ref=v5.0.0\n")},
			reason: workerv1.ReasonTemplateRejected, message: "remote bases and files are not allowed",
		},
		{
			name:   "remote component",
			files:  map[string]string{baseKustomization: baseWith("components:\n  - git@github.com:org/repo.git//comp\n")},
			reason: workerv1.ReasonTemplateRejected, message: "remote bases and files are not allowed",
		},
		{
			name:   "remote patch file",
			files:  map[string]string{baseKustomization: baseWith("patches:\n  - path: https://example.com/patch.yaml\n")},
			reason: workerv1.ReasonTemplateRejected, message: "remote bases and files are not allowed",
		},
		{
			name: "template path is a URL", path: "https://example.com/base",
			reason: workerv1.ReasonTemplateRejected, message: "remote bases are not allowed",
		},
		{
			name: "template path escapes", path: "apps/../../etc",
			reason: workerv1.ReasonTemplateRejected, message: "escapes the repository",
		},
		{
			name:   "resource escapes",
			files:  map[string]string{baseKustomization: baseWith("  - ../../../../etc\n")},
			reason: workerv1.ReasonTemplateRejected, message: "outside the template repository",
		},
		{
			name:   "generator file escapes",
			files:  map[string]string{baseKustomization: baseWith("configMapGenerator:\n  - name: x\n    files:\n      - passwd=../../../../etc/passwd\n")},
			reason: workerv1.ReasonTemplateRejected, message: "outside the template repository",
		},
		{
			name:  "generator file in a sibling dir",
			files: map[string]string{baseKustomization: baseWith("configMapGenerator:\n  - name: x\n    files:\n      - ../components/ingress/ingress.yaml\n")},
			// Inside the repository, so the guard lets it through, and
			// krusty's root-only restriction refuses it.
			reason: workerv1.ReasonRenderFailed, message: "security; file",
		},
		{
			name:   "symlink",
			files:  map[string]string{baseKustomization: baseWith("  - passwd.yaml\n")},
			links:  []string{"apps/code-server/base/passwd.yaml"},
			reason: workerv1.ReasonTemplateRejected, message: "symbolic link",
		},
		{
			name:   "helm chart",
			files:  map[string]string{baseKustomization: baseWith("helmCharts:\n  - name: minecraft\n    repo: https://itzg.github.io/minecraft-server-charts\n")},
			reason: workerv1.ReasonTemplateRejected, message: "Helm chart",
		},
		{
			name: "exec function transformer",
			files: map[string]string{
				baseKustomization: baseWith("transformers:\n  - fn.yaml\n"),
				"apps/code-server/base/fn.yaml": `apiVersion: example.com/v1
kind: Injector
metadata:
  name: inject
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: ` + script + "\n",
			},
			reason: workerv1.ReasonRenderFailed, message: "plugin",
		},
		{
			name: "legacy exec plugin generator",
			files: map[string]string{
				baseKustomization:                baseWith("generators:\n  - gen.yaml\n"),
				"apps/code-server/base/gen.yaml": "apiVersion: someteam.example.com/v1\nkind: SecretsFromVault\nmetadata:\n  name: vault\n",
			},
			reason: workerv1.ReasonRenderFailed, message: "plugin",
		},
		{
			name:   "missing base",
			path:   "apps/nope/base",
			reason: workerv1.ReasonRenderFailed, message: "does not exist",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := claim(apps[0], fx.srv.URL, v1alpha1.Exposure{}, nil, nil)
			if tc.path != "" {
				c.Template.Source.Path = tc.path
			}
			_, err := render.Manifests(c, withFiles(fx, tc.files, tc.links...), render.Limits{})
			var fe *failure.Error
			if !errors.As(err, &fe) {
				t.Fatalf("want a classified failure, got %v", err)
			}
			if diff := cmp.Diff([]any{tc.reason, true}, []any{fe.Reason, fe.Permanent}); diff != "" {
				t.Errorf("reason/permanent (-want +got):\n%s\nerr: %v", diff, err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not say %q", err, tc.message)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the exec function ran")
			}
		})
	}
}

func TestOutputSizeLimit(t *testing.T) {
	fx := snapshot(t)
	c := claim(apps[0], fx.srv.URL, v1alpha1.Exposure{}, nil, nil)
	if _, err := render.Manifests(c, fx.snap, render.Limits{MaxOutputBytes: 64 << 10}); err != nil {
		t.Fatalf("64 KiB should fit: %v", err)
	}
	_, err := render.Manifests(c, fx.snap, render.Limits{MaxOutputBytes: 1000})
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonRenderFailed || !fe.Permanent || !strings.Contains(err.Error(), "1000-byte limit") {
		t.Fatalf("want a permanent RenderFailed over the limit, got %v", err)
	}
}
