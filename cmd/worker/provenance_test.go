package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/sign"
)

func TestRevisionDigest(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	sum := "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	for _, tc := range []struct {
		rev  string
		want map[string]string
	}{
		{commit, map[string]string{"gitCommit": commit}},
		{"sha256:" + sum, map[string]string{"sha256": sum}},
		{"listing:sha256:" + sum, map[string]string{"packlineListingSha256": sum}},
		{"main", nil},
		{"", nil},
	} {
		if diff := cmp.Diff(tc.want, revisionDigest(tc.rev)); diff != "" {
			t.Errorf("revisionDigest(%q) (-want +got):\n%s", tc.rev, diff)
		}
	}
}

// The provenance's externalParameters name every field of each source kind
// that decides what is fetched and packed, as written but with no
// credential: URLs lose user info, query and fragment, Secret references
// are left out. The resolved dependency is the source as fetched (the
// Hugging Face endpoint the fetch used, HF_ENDPOINT included).
func TestArtifactProvenanceParameters(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	sum := strings.Repeat("ab", 32)
	tgt := workerv1.Target{Repository: "reg.example/team-a/model", Tag: "v1"}
	tgtParams := map[string]any{"repository": "reg.example/team-a/model", "tag": "v1"}
	secret := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}
	for _, tc := range []struct {
		name       string
		a          workerv1.Artifact
		rev, hfEnv string
		want       map[string]any
		dep        sign.Dependency
	}{{
		name: "hugging face",
		a: workerv1.Artifact{Source: v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{
			Repo: "org/model", Revision: "main", Include: []string{"*.safetensors", "config.json"}, Exclude: []string{"*.bin"},
			Endpoint: "https://user:tok@hub.example/?token=hf_secret#x", TokenSecretRef: secret,
		}}, Format: v1alpha1.FormatModelPack, Compression: v1alpha1.CompressionZstd, Target: tgt},
		rev: commit,
		want: map[string]any{"format": "ModelPack", "compression": "zstd", "target": tgtParams, "source": map[string]any{"huggingFace": map[string]any{
			"repo": "org/model", "revision": "main", "endpoint": "https://hub.example",
			"include": []any{"*.safetensors", "config.json"}, "exclude": []any{"*.bin"},
		}}},
		dep: sign.Dependency{Name: "org/model", URI: "https://hub.example/org/model", Digest: map[string]string{"gitCommit": commit}},
	}, {
		name: "hugging face from HF_ENDPOINT",
		a: workerv1.Artifact{Source: v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model"}},
			Format: v1alpha1.FormatModelKit, Target: tgt},
		rev: commit, hfEnv: "https://mirror.example/hf/",
		want: map[string]any{"format": "ModelKit", "compression": "none", "target": tgtParams, "source": map[string]any{"huggingFace": map[string]any{
			"repo": "org/model", "revision": "", "endpoint": "https://mirror.example/hf",
		}}},
		dep: sign.Dependency{Name: "org/model", URI: "https://mirror.example/hf/org/model", Digest: map[string]string{"gitCommit": commit}},
	}, {
		name: "git",
		a: workerv1.Artifact{Source: v1alpha1.ArtifactSource{Git: &v1alpha1.GitSource{
			URL: "https://user:pass@git.example/models.git?private_token=glpat-secret", Ref: "v1", Path: "m",
			SecretRef: &corev1.LocalObjectReference{Name: "git-creds"},
		}}, Format: v1alpha1.FormatModelKit, Compression: v1alpha1.CompressionGzip, Kitfile: "package:\n  name: x\n", Target: tgt},
		rev: commit,
		want: map[string]any{"format": "ModelKit", "compression": "gzip", "target": tgtParams, "kitfileSha256": sha256Hex([]byte("package:\n  name: x\n")),
			"source": map[string]any{"git": map[string]any{"url": "https://git.example/models.git", "ref": "v1", "path": "m"}}},
		dep: sign.Dependency{URI: "git+https://git.example/models.git@v1", Digest: map[string]string{"gitCommit": commit}},
	}, {
		name: "http",
		a: workerv1.Artifact{Source: v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{
			URL: "https://bucket.example/m.gguf?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIA", SHA256: sum,
		}}, Format: v1alpha1.FormatModelKit, Target: tgt, Annotations: map[string]string{"team": "a"}},
		rev: "sha256:" + sum,
		want: map[string]any{"format": "ModelKit", "compression": "none", "target": tgtParams, "annotations": map[string]any{"team": "a"},
			"source": map[string]any{"http": map[string]any{"url": "https://bucket.example/m.gguf", "sha256": sum}}},
		dep: sign.Dependency{URI: "https://bucket.example/m.gguf", Digest: map[string]string{"sha256": sum}},
	}, {
		name: "oci",
		a: workerv1.Artifact{Source: v1alpha1.ArtifactSource{OCI: &v1alpha1.OCISource{
			Reference: "mirror.example:5000/m@sha256:" + sum, PlainHTTP: true, PullSecretRef: &corev1.LocalObjectReference{Name: "pull"},
		}}, Format: v1alpha1.FormatModelKit, Target: tgt},
		rev: "sha256:" + sum,
		want: map[string]any{"format": "ModelKit", "compression": "none", "target": tgtParams,
			"source": map[string]any{"oci": map[string]any{"reference": "mirror.example:5000/m@sha256:" + sum, "plainHTTP": true}}},
		dep: sign.Dependency{URI: "oci://mirror.example:5000/m@sha256:" + sum, Digest: map[string]string{"sha256": sum}},
	}, {
		name: "volume",
		a: workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "models", Path: "m"}},
			Format: v1alpha1.FormatModelPack, Target: tgt,
			Signing: &workerv1.Signing{Resource: workerv1.Resource{Kind: "Artifact", Namespace: "team-a", Name: "m", UID: "u1", Generation: 2}}},
		rev: "listing:sha256:" + sum,
		want: map[string]any{"format": "ModelPack", "compression": "none", "target": tgtParams,
			"resource": map[string]any{"kind": "Artifact", "namespace": "team-a", "name": "m", "uid": "u1", "generation": float64(2)},
			"source":   map[string]any{"volume": map[string]any{"claimName": "models", "path": "m"}}},
		dep: sign.Dependency{URI: "pvc://team-a/models/m", Digest: map[string]string{"packlineListingSha256": sum}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := artifactProvenance(tc.a, tc.rev, tc.hfEnv, time.Time{})
			if d := cmp.Diff(tc.want, p.External); d != "" {
				t.Errorf("externalParameters (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]sign.Dependency{tc.dep}, p.Resolved); d != "" {
				t.Errorf("resolvedDependencies (-want +got):\n%s", d)
			}
			noCredential(t, p)
		})
	}
}

// Two Artifacts of one Hub repository that fetch other files have other
// parameters: the attestation tells them apart.
func TestProvenanceTellsHubSelectionsApart(t *testing.T) {
	hf := func(include ...string) workerv1.Artifact {
		return workerv1.Artifact{Source: v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/model", Include: include}}}
	}
	a := artifactProvenance(hf("*.safetensors"), "", "", time.Time{})
	b := artifactProvenance(hf("*.gguf"), "", "", time.Time{})
	if cmp.Equal(a.External, b.External) {
		t.Errorf("include *.safetensors and *.gguf give the same parameters %v", a.External)
	}
}

// A Claim's exposure is recorded whole: two Claims with other hosts or
// node ports have other parameters.
func TestClaimProvenanceExposure(t *testing.T) {
	port := int32(30080)
	for _, tc := range []struct {
		e    v1alpha1.Exposure
		want map[string]any
	}{
		{v1alpha1.Exposure{}, map[string]any{"type": "ClusterIP"}},
		{v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort, NodePort: &port}, map[string]any{"type": "NodePort", "nodePort": float64(30080)}},
		{v1alpha1.Exposure{Type: v1alpha1.ExposureIngress, Host: "ide.team-a.example"}, map[string]any{"type": "Ingress", "host": "ide.team-a.example"}},
	} {
		c := workerv1.Claim{Exposure: tc.e, Template: v1alpha1.ClaimTemplateSpec{Source: v1alpha1.TemplateSource{URL: "https://u:p@git.example/t.git?x=y", Ref: "main"}}}
		p := claimProvenance(c, "", time.Time{})
		if d := cmp.Diff(tc.want, p.External["exposure"]); d != "" {
			t.Errorf("exposure %+v (-want +got):\n%s", tc.e, d)
		}
		noCredential(t, p)
	}
}

// noCredential checks that p encodes as a statement (every parameter is
// JSON that structpb takes) and that redaction finds nothing in it.
func noCredential(t *testing.T, p sign.Provenance) {
	t.Helper()
	st, err := sign.Statement("reg.example/m", digest.FromString("m"), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := redact.String(string(st)); got != string(st) {
		t.Errorf("the statement holds what redaction removes:\n%s", st)
	}
	for _, s := range []string{"tok@", "hf_secret", "pass@", "glpat", "Signature", "AKIA", "git-creds", "hf-token"} {
		if strings.Contains(string(st), s) {
			t.Errorf("the statement holds %q:\n%s", s, st)
		}
	}
}
