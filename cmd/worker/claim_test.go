package main

import (
	"github.com/packline/packline/test/fixtures"
	"os"
	"path/filepath"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/regtest"
)

func TestClaimEndToEnd(t *testing.T) {
	host := regtest.Start(t)
	git := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{
		{Dir: gitserver.FixtureDir(t, "templates"), Tags: []string{"v1.0.0"}},
	}}, gitserver.Options{})
	c := workerv1.Claim{
		Name: "ide", Namespace: "team-a",
		Template: v1alpha1.ClaimTemplateSpec{
			Source:    v1alpha1.TemplateSource{URL: git.URL, Ref: "v1.0.0", Path: "apps/code-server/base"},
			Kinds:     fixtures.TemplateKinds,
			Service:   "code-server",
			Exposures: []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureIngress, Component: "apps/code-server/components/ingress"}},
		},
		Exposure: v1alpha1.Exposure{Type: v1alpha1.ExposureIngress, Host: "ide.team-a.example.com"},
		Profile:  &v1alpha1.EnvironmentProfileSpec{IngressClassName: "nginx"},
		Target:   workerv1.Target{Repository: host + "/claims/team-a/ide", Tag: "v1", PlainHTTP: true},
	}

	code, res := runClaimWorker(t, c)
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, result error %+v", code, res.Error)
	}
	if res.SourceRevision != git.Commits[0] || res.Tag != "v1" || res.ArtifactType != "application/vnd.cncf.flux.config.v1+json" {
		t.Errorf("result %+v", res)
	}
	repo, err := registry.Repository(c.Target.Repository, registry.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := repo.Resolve(t.Context(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != res.Digest {
		t.Errorf("tag points at %s, result says %s", desc.Digest, res.Digest)
	}

	// A second run of the same claim must not make GitOps roll.
	code, again := runClaimWorker(t, c)
	if code != 0 || again.Digest != res.Digest {
		t.Errorf("re-run gave exit %d digest %s, want %s", code, again.Digest, res.Digest)
	}
}

func TestClaimFailureResults(t *testing.T) {
	git := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{
		{Dir: gitserver.FixtureDir(t, "templates"), Files: map[string]string{
			"apps/remote/base/kustomization.yaml": "resources:\n  - https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.0.0\n",
		}},
	}}, gitserver.Options{})
	host := regtest.Start(t)
	tests := []struct {
		name   string
		path   string
		ref    string
		reason string
	}{
		{"remote base", "apps/remote/base", "main", workerv1.ReasonTemplateRejected},
		{"unknown ref", "apps/code-server/base", "release-9", workerv1.ReasonSourceNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, res := runClaimWorker(t, workerv1.Claim{
				Name: "x", Namespace: "team-a",
				Template: v1alpha1.ClaimTemplateSpec{Source: v1alpha1.TemplateSource{URL: git.URL, Ref: tc.ref, Path: tc.path}, Kinds: fixtures.TemplateKinds},
				Target:   workerv1.Target{Repository: host + "/claims/x", Tag: "v1", PlainHTTP: true},
			})
			if code == 0 || res.Error == nil || res.Error.Reason != tc.reason || !res.Error.Permanent {
				t.Errorf("exit %d, result %+v, want permanent %s", code, res.Error, tc.reason)
			}
		})
	}

	t.Run("bad spec", func(t *testing.T) {
		t.Setenv(workerv1.EnvSpec, `{"name":"x","bogus":1}`)
		log := filepath.Join(t.TempDir(), "termination-log")
		t.Setenv(EnvTerminationLog, log)
		if code := run([]string{"claim"}); code == 0 {
			t.Error("exit 0 on a bad spec")
		}
		b, _ := os.ReadFile(log)
		res, err := workerv1.ParseResult(b)
		if err != nil || res.Error.Reason != workerv1.ReasonInvalidSpec || !res.Error.Permanent {
			t.Errorf("result %s (%v), want permanent InvalidSpec", b, err)
		}
	})
}

// TestClaimCheck: `worker claim` with check: true (a ClaimTemplate's check)
// needs no target, pushes nothing, and reports the commit and kinds.
func TestClaimCheck(t *testing.T) {
	git := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}}, gitserver.Options{})
	c := workerv1.Claim{
		Name: "template-check", Namespace: "packline-system", Check: true,
		Template: v1alpha1.ClaimTemplateSpec{
			Source:    v1alpha1.TemplateSource{URL: git.URL, Ref: "main", Path: "apps/code-server/base"},
			Kinds:     fixtures.TemplateKinds,
			Service:   "code-server",
			Exposures: []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureIngress, Component: "apps/code-server/components/ingress"}},
		},
		Exposure: v1alpha1.Exposure{Type: v1alpha1.ExposureIngress, Host: "template-check.example.com"},
	}
	code, res := runClaimWorker(t, c)
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, result error %+v", code, res.Error)
	}
	if !res.Check || res.Reference != "" || res.SourceRevision != git.Commits[0] || len(res.Kinds) == 0 {
		t.Errorf("check result %+v", res)
	}
	c.Template.Source.Path = "apps/no-such-app"
	if code, res := runClaimWorker(t, c); code == 0 || !res.Failed() || !res.Error.Permanent {
		t.Errorf("a wrong path passed its check: exit %d, result %+v", code, res)
	}
}
