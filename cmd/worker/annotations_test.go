package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/fixtures"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/regtest"
)

// TestPushedAnnotationsCarryNoCredential pushes, signed, an Artifact from
// a Git URL with userinfo (which go-git uses as the credential), one from a
// download URL with a signed query and a fragment, and a Claim, and reads
// back what anyone who can pull sees: the manifest's annotations and the
// provenance attestation. The source is named by its scheme, host and path
// alone. (A Git URL with a query cannot be cloned over HTTP: go-git puts
// the query before the path it appends and refuses the answer; a template
// URL with userinfo is refused before the clone. redact.TestPublic holds
// the form for those too.)
func TestPushedAnnotationsCarryNoCredential(t *testing.T) {
	host := regtest.Start(t)
	kp, keyPEM := cosignKey(t, "")
	keyDir(t, keyPEM, "")
	private := gitserver.Serve(t, gitserver.Repo{Name: "models", Commits: []gitserver.Commit{{Files: map[string]string{"w.gguf": "w"}}}},
		gitserver.Options{Username: "alice", Password: "s3cret-pw"})
	templates := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}},
		gitserver.Options{})
	download := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("gguf")) }))
	defer download.Close()
	withUser := strings.Replace(private.URL, "http://", "http://alice:s3cret-pw@", 1)

	target := func(name string) workerv1.Target {
		return workerv1.Target{Repository: host + "/noleak/" + name, Tag: "v1", PlainHTTP: true}
	}
	for _, tc := range []struct {
		name string
		run  func() (int, workerv1.Result)
		// source is the annotation's value: the URL without its secrets.
		source string
	}{{
		name: "artifact from Git",
		run: func() (int, workerv1.Result) {
			return runWorker(t, workerv1.Artifact{Source: v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{URL: withUser}},
				Format: v1alpha1.FormatModelKit, Target: target("git"), Signing: testSigning("Artifact", "git")})
		},
		source: private.URL,
	}, {
		name: "artifact from HTTP",
		run: func() (int, workerv1.Result) {
			return runWorker(t, workerv1.Artifact{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: download.URL + "/w.gguf?X-Amz-Signature=s3cret-sig#token=x"}},
				Format: v1alpha1.FormatModelKit, Target: target("http"), Signing: testSigning("Artifact", "http")})
		},
		source: download.URL + "/w.gguf",
	}, {
		name: "claim",
		run: func() (int, workerv1.Result) {
			return runClaimWorker(t, workerv1.Claim{Name: "ide", Namespace: "team-a",
				Template: v1alpha1.ClaimTemplateSpec{
					Source: v1alpha1.TemplateSource{URL: templates.URL, Path: "apps/code-server/base"},
					Kinds:  fixtures.TemplateKinds, Service: "code-server",
				},
				Values:  &apiextensionsv1.JSON{Raw: []byte(`{"replicas":1}`)},
				Profile: &v1alpha1.EnvironmentProfileSpec{IngressClassName: "nginx"},
				Target:  target("claim"),
				Signing: &workerv1.Signing{KeyField: "EnvironmentProfile lab spec.signing.keySecretRef", Template: "code-server", Profile: "lab",
					Resource: workerv1.Resource{Kind: "Claim", Namespace: "team-a", Name: "ide", Generation: 1}}})
		},
		source: templates.URL,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			code, res := tc.run()
			if code != 0 || res.Failed() {
				t.Fatalf("exit %d, error %+v", code, res.Error)
			}
			repoRef, _, _ := strings.Cut(res.Reference, "@")
			repo, err := registry.Repository(repoRef, registry.Options{PlainHTTP: true})
			if err != nil {
				t.Fatal(err)
			}
			m := pushedManifest(t, repo, "v1")
			if d := cmp.Diff(tc.source, m.Annotations[ocispec.AnnotationSource]); d != "" {
				t.Errorf("source annotation (-want +got):\n%s", d)
			}
			for k, v := range m.Annotations {
				if leaks(v) {
					t.Errorf("annotation %s = %q carries a credential or a query", k, v)
				}
			}
			pred, err := json.Marshal(verifyWithCosign(t, kp.Public(), res))
			if err != nil {
				t.Fatal(err)
			}
			if leaks(string(pred)) {
				t.Errorf("provenance carries a credential or a query:\n%s", pred)
			}
			if !strings.Contains(string(pred), tc.source) {
				t.Errorf("provenance does not name the source %s:\n%s", tc.source, pred)
			}
		})
	}
}

// leaks reports whether a recorded value holds any part of the sources'
// userinfo, query or fragment.
func leaks(v string) bool {
	for _, s := range []string{"alice", "s3cret", "token=", "X-Amz-Signature", "?", "#"} {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}
