package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/cosigntest"
	"github.com/packline/packline/test/fixtures"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/regtest"
)

// keyDir mounts a key pair the way the Job does: cosign.key and
// cosign.password files in the signing key folder.
func keyDir(t *testing.T, keyPEM []byte, password string) {
	t.Helper()
	dir := t.TempDir()
	if keyPEM != nil {
		if err := os.WriteFile(filepath.Join(dir, workerv1.SigningKeyFile), keyPEM, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	if password != "" {
		if err := os.WriteFile(filepath.Join(dir, workerv1.SigningPasswordFile), []byte(password), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvSigningKeyDir, dir)
}

func cosignKey(t *testing.T, password string) (cosigntest.KeyPair, []byte) {
	t.Helper()
	kp := cosigntest.GenerateKeyPair(t, password)
	b, err := os.ReadFile(kp.Private())
	if err != nil {
		t.Fatal(err)
	}
	return kp, b
}

func testSigning(kind, name string) *workerv1.Signing {
	return &workerv1.Signing{KeyField: "spec.signing.keySecretRef (Secret signing-key)",
		Resource: workerv1.Resource{Kind: kind, Namespace: "team-a", Name: name, UID: "uid-1", Generation: 3}}
}

// verifyWithCosign checks res with the real cosign CLI, and returns the
// provenance predicate of the verified attestation.
func verifyWithCosign(t *testing.T, pub string, res workerv1.Result) map[string]any {
	t.Helper()
	if res.Signature == "" || res.Attestation == "" {
		t.Fatalf("result names no signature or attestation: %+v", res)
	}
	if out, err := cosigntest.Verify(t, pub, res.Reference); err != nil {
		t.Fatalf("cosign verify %s: %v\n%s", res.Reference, err, out)
	}
	out, err := cosigntest.VerifyAttestation(t, pub, res.Reference)
	if err != nil {
		t.Fatalf("cosign verify-attestation %s: %v\n%s", res.Reference, err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		var env struct{ PayloadType, Payload string }
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &env) != nil || env.Payload == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			PredicateType string           `json:"predicateType"`
			Subject       []map[string]any `json:"subject"`
			Predicate     map[string]any   `json:"predicate"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimPrefix(res.Digest, "sha256:"); st.Subject[0]["digest"].(map[string]any)["sha256"] != want {
			t.Errorf("attestation subject %v, want digest %s", st.Subject, want)
		}
		return st.Predicate
	}
	t.Fatalf("cosign verify-attestation printed no attestation:\n%s", out)
	return nil
}

// get walks a decoded JSON object along keys (numbers index arrays).
func get(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// TestSignedArtifactsVerifyWithCosign: a ModelKit and a ModelPack pushed
// with a cosign key pass `cosign verify` and `cosign verify-attestation
// --type slsaprovenance1`, signing leaves the manifest digest as it was,
// and a tag moved to other content fails verification.
func TestSignedArtifactsVerifyWithCosign(t *testing.T) {
	host := regtest.Start(t)
	kp, keyPEM := cosignKey(t, "s3cret-pass")
	// Written with echo: the newline is not part of the password.
	password := kp.Password + "\n"
	archive := tgz(t, map[string]string{"model.gguf": "gguf", "README.md": "# m"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(archive) }))
	defer srv.Close()
	vol := t.TempDir()
	os.WriteFile(filepath.Join(vol, "w.safetensors"), []byte("w"), 0o644)
	t.Setenv(EnvSourceVolumeDir, vol)
	t.Setenv(workerv1.EnvWorkerImage, "ghcr.io/packline/worker@sha256:"+strings.Repeat("ab", 32))

	for _, tc := range []struct {
		name   string
		format v1alpha1.PackFormat
		source v1alpha1.ArtifactSource
		// dep is the resolved dependency's URI in the provenance.
		dep string
	}{
		{"ModelKit from HTTP", v1alpha1.FormatModelKit, v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/m.tar.gz?X-Amz-Signature=secret"}}, srv.URL + "/m.tar.gz"},
		{"ModelPack from a volume", v1alpha1.FormatModelPack, v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "models"}}, "pvc://team-a/models/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := workerv1.Artifact{Source: tc.source, Format: tc.format,
				Target: workerv1.Target{Repository: host + "/signed/" + strings.ToLower(string(tc.format)), Tag: "v1", PlainHTTP: true}}
			keyDir(t, nil, "")
			code, unsigned := runWorker(t, a)
			if code != 0 {
				t.Fatalf("unsigned run: %+v", unsigned.Error)
			}

			keyDir(t, keyPEM, password)
			a.Signing = testSigning("Artifact", "tiny")
			code, res := runWorker(t, a)
			if code != 0 || res.Failed() {
				t.Fatalf("exit %d, error %+v", code, res.Error)
			}
			if res.Digest != unsigned.Digest {
				t.Errorf("signing changed the manifest digest: %s, unsigned %s", res.Digest, unsigned.Digest)
			}
			pred := verifyWithCosign(t, kp.Public(), res)
			for _, c := range []struct {
				path []any
				want any
			}{
				{[]any{"buildDefinition", "buildType"}, BuildTypeArtifact},
				{[]any{"buildDefinition", "externalParameters", "format"}, string(tc.format)},
				{[]any{"buildDefinition", "externalParameters", "resource", "name"}, "tiny"},
				{[]any{"buildDefinition", "externalParameters", "resource", "generation"}, float64(3)},
				{[]any{"buildDefinition", "resolvedDependencies", 0, "uri"}, tc.dep},
				{[]any{"runDetails", "builder", "id"}, "https://packline.dev/worker"},
				{[]any{"runDetails", "builder", "version", "packline"}, version},
				{[]any{"runDetails", "builder", "builderDependencies", 0, "digest", "sha256"}, strings.Repeat("ab", 32)},
			} {
				if got := get(pred, c.path...); got != c.want {
					t.Errorf("provenance %v = %v, want %v", c.path, got, c.want)
				}
			}
			if d := get(pred, "buildDefinition", "resolvedDependencies", 0, "digest"); d == nil {
				t.Errorf("resolved source has no digest: %v", get(pred, "buildDefinition"))
			}

			// A re-run keeps the signature where it is.
			code, again := runWorker(t, a)
			if code != 0 || again.Signature != res.Signature || again.Digest != res.Digest {
				t.Errorf("re-run: exit %d, signature %s digest %s; first %s %s", code, again.Signature, again.Digest, res.Signature, res.Digest)
			}

			// Someone pushes other content to the tag: it does not verify.
			keyDir(t, nil, "")
			tampered := a
			tampered.Signing = nil
			tampered.Kitfile = "package:\n  name: tampered\n"
			if code, r := runWorker(t, tampered); code != 0 || r.Digest == res.Digest {
				t.Fatalf("tampering push: exit %d, %+v", code, r)
			}
			ref := a.Target.Repository + ":v1"
			if out, err := cosigntest.Verify(t, kp.Public(), ref); err == nil {
				t.Errorf("cosign verify accepted the tampered tag %s:\n%s", ref, out)
			}
			if out, err := cosigntest.VerifyAttestation(t, kp.Public(), ref); err == nil {
				t.Errorf("cosign verify-attestation accepted the tampered tag %s:\n%s", ref, out)
			}
		})
	}
}

// TestSignedClaimVerifiesWithCosign: a Claim's manifests artifact, signed,
// with the template commit, profile and values hash in its provenance.
func TestSignedClaimVerifiesWithCosign(t *testing.T) {
	host := regtest.Start(t)
	kp, keyPEM := cosignKey(t, "")
	keyDir(t, keyPEM, "")
	git := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{
		{Dir: gitserver.FixtureDir(t, "templates"), Tags: []string{"v1.0.0"}},
	}}, gitserver.Options{})
	values := `{"replicas":2}`
	c := workerv1.Claim{
		Name: "ide", Namespace: "team-a",
		Template: v1alpha1.ClaimTemplateSpec{
			Source:  v1alpha1.TemplateSource{URL: git.URL, Ref: "v1.0.0", Path: "apps/code-server/base"},
			Kinds:   fixtures.TemplateKinds,
			Service: "code-server",
		},
		Values:  &apiextensionsv1.JSON{Raw: []byte(values)},
		Profile: &v1alpha1.EnvironmentProfileSpec{IngressClassName: "nginx"},
		Target:  workerv1.Target{Repository: host + "/claims/team-a/ide", Tag: "v1", PlainHTTP: true},
		Signing: &workerv1.Signing{KeyField: "EnvironmentProfile lab spec.signing.keySecretRef", Template: "code-server", Profile: "lab",
			Resource: workerv1.Resource{Kind: "Claim", Namespace: "team-a", Name: "ide", Generation: 1}},
	}
	unsignedClaim := c
	unsignedClaim.Signing = nil
	code, unsigned := runClaimWorker(t, unsignedClaim)
	if code != 0 {
		t.Fatalf("unsigned run: %+v", unsigned.Error)
	}
	code, res := runClaimWorker(t, c)
	if code != 0 || res.Failed() {
		t.Fatalf("exit %d, error %+v", code, res.Error)
	}
	if res.Digest != unsigned.Digest {
		t.Errorf("signing changed the manifest digest: %s, unsigned %s", res.Digest, unsigned.Digest)
	}
	pred := verifyWithCosign(t, kp.Public(), res)
	for _, w := range []struct {
		path []any
		want any
	}{
		{[]any{"buildDefinition", "buildType"}, BuildTypeClaim},
		{[]any{"buildDefinition", "externalParameters", "template"}, "code-server"},
		{[]any{"buildDefinition", "externalParameters", "valuesSha256"}, sha256Hex([]byte(values))},
		{[]any{"buildDefinition", "internalParameters", "profile"}, "lab"},
		{[]any{"buildDefinition", "resolvedDependencies", 0, "digest", "gitCommit"}, git.Commits[0]},
		{[]any{"buildDefinition", "externalParameters", "resource", "namespace"}, "team-a"},
	} {
		if got := get(pred, w.path...); got != w.want {
			t.Errorf("provenance %v = %v, want %v", w.path, got, w.want)
		}
	}
}

// TestSigningKeyFailures: each key problem is a permanent failure with its
// own reason and a message naming the field and never the key. A key that
// is missing or of the wrong type fails before anything is fetched; a
// wrong password is found while the download runs (scrypt takes a while),
// and stops the run before the manifest is pushed: the tag never points
// at an unsigned artifact.
func TestSigningKeyFailures(t *testing.T) {
	host := regtest.Start(t)
	_, keyPEM := cosignKey(t, "right")
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER})
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write([]byte("weights"))
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name     string
		key      []byte
		password string
		reason   string
		// early: found before the source is fetched.
		early bool
	}{
		{"wrong password", keyPEM, "hunter2-not-it", workerv1.ReasonSigningKeyPassword, false},
		{"no password for an encrypted key", keyPEM, "", workerv1.ReasonSigningKeyPassword, false},
		{"missing key", nil, "", workerv1.ReasonSigningKeyMissing, true},
		{"RSA key", rsaPEM, "", workerv1.ReasonSigningKeyUnsupported, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keyDir(t, tc.key, tc.password)
			before := fetched.Load()
			repository := host + "/keys/" + strings.ReplaceAll(tc.name, " ", "-")
			code, res := runWorker(t, workerv1.Artifact{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/m.bin"}},
				Target: workerv1.Target{Repository: strings.ToLower(repository), Tag: "v1", PlainHTTP: true}, Signing: testSigning("Artifact", "x")})
			if code != 1 || !res.Failed() || res.Error.Reason != tc.reason || !res.Error.Permanent {
				t.Fatalf("exit %d, error %+v; want permanent %s", code, res.Error, tc.reason)
			}
			if !strings.Contains(res.Error.Message, "spec.signing.keySecretRef (Secret signing-key)") {
				t.Errorf("message does not name the field: %s", res.Error.Message)
			}
			if strings.Contains(res.Error.Message, "PRIVATE KEY") || (tc.password != "" && strings.Contains(res.Error.Message, tc.password)) {
				t.Errorf("message holds key material: %s", res.Error.Message)
			}
			if n := fetched.Load() - before; tc.early && n != 0 {
				t.Errorf("the source was fetched %d times although the key was unusable", n)
			}
			repo, err := registry.Repository(strings.ToLower(repository), registry.Options{PlainHTTP: true})
			if err != nil {
				t.Fatal(err)
			}
			if desc, err := repo.Resolve(t.Context(), "v1"); err == nil {
				t.Errorf("an unsigned artifact was tagged: %s", desc.Digest)
			}
		})
	}
}

// flakyRegistry is a proxy in front of the real registry that drops the
// connection of every request for a cosign tag while down is set, as an
// unreachable registry would, and counts what else is uploaded.
type flakyRegistry struct {
	host    string
	down    atomic.Bool
	mu      sync.Mutex
	uploads []string
}

func startFlakyRegistry(t *testing.T, backend string) *flakyRegistry {
	f := &flakyRegistry{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: backend})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// cosign's tags, sha256-<hex>.sig and .att; not the image
		// view's sha256-<hex>.image, pushed with the artifact.
		cosignTag := strings.Contains(r.URL.Path, "/manifests/sha256-") && !strings.HasSuffix(r.URL.Path, ".image")
		if f.down.Load() && cosignTag {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if (r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodPatch) && !cosignTag {
			f.mu.Lock()
			f.uploads = append(f.uploads, r.Method+" "+r.URL.Path)
			f.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.host = strings.TrimPrefix(srv.URL, "http://")
	return f
}

// manifestUploads are the uploads of manifests other than cosign's.
func (f *flakyRegistry) manifestUploads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, u := range f.uploads {
		if strings.Contains(u, "/manifests/") {
			out = append(out, u)
		}
	}
	return out
}

// TestSignaturePushRetriedWithoutRepush: the registry goes away between
// the artifact push and the signature push. The run fails as retryable
// and names the pushed artifact; the retry (PACKLINE_PUSHED_DIGEST, as the
// controller sets it) fetches nothing and pushes no artifact manifest, and
// the result verifies.
func TestSignaturePushRetriedWithoutRepush(t *testing.T) {
	backend := regtest.Start(t)
	reg := startFlakyRegistry(t, backend)
	if _, _, err := net.SplitHostPort(reg.host); err != nil {
		t.Fatal(err)
	}
	kp, keyPEM := cosignKey(t, "pw")
	keyDir(t, keyPEM, kp.Password)
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write([]byte("weights"))
	}))
	defer srv.Close()
	a := workerv1.Artifact{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/w.bin"}},
		Target: workerv1.Target{Repository: reg.host + "/models/flaky", Tag: "v1", PlainHTTP: true}, Signing: testSigning("Artifact", "flaky")}

	reg.down.Store(true)
	code, res := runWorker(t, a)
	if code != 1 || !res.Failed() || res.Error.Reason != workerv1.ReasonSignaturePush || res.Error.Permanent {
		t.Fatalf("exit %d, error %+v; want retryable %s", code, res.Error, workerv1.ReasonSignaturePush)
	}
	if p := res.Error.Pushed; p == nil || !strings.HasSuffix(p.Reference, "@"+p.Digest) || p.SourceRevision == "" {
		t.Fatalf("failure does not name the pushed artifact: %+v", res.Error)
	}
	if !strings.Contains(res.Error.Message, "is pushed, but attaching its signature failed") {
		t.Errorf("message: %s", res.Error.Message)
	}
	pushed := *res.Error.Pushed
	fetchesBefore, manifestsBefore := fetched.Load(), len(reg.manifestUploads())

	reg.down.Store(false)
	t.Setenv(workerv1.EnvPushedDigest, pushed.Digest)
	t.Setenv(workerv1.EnvPushedRevision, pushed.SourceRevision)
	code, res = runWorker(t, a)
	if code != 0 || res.Failed() {
		t.Fatalf("retry: exit %d, error %+v", code, res.Error)
	}
	if res.Digest != pushed.Digest || res.SourceRevision != pushed.SourceRevision {
		t.Errorf("retry result %+v, want the pushed %+v", res, pushed)
	}
	if !strings.HasPrefix(res.ImageReference, reg.host+"/models/flaky@sha256:") {
		t.Errorf("retry result names image view %q, want one in the artifact's repository", res.ImageReference)
	}
	if n := fetched.Load() - fetchesBefore; n != 0 {
		t.Errorf("the retry fetched the source %d times", n)
	}
	if ups := reg.manifestUploads()[manifestsBefore:]; len(ups) != 0 {
		t.Errorf("the retry pushed the artifact again: %v", ups)
	}
	verifyWithCosign(t, kp.Public(), res)
}
