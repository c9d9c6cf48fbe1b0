package main

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"time"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/sign"
	"github.com/packline/packline/jobs/source"
)

// Build types: what a run's externalParameters mean. They name packline's
// documented API, the spec a user wrote.
const (
	BuildTypeArtifact = "https://packline.dev/buildtypes/artifact/v1"
	BuildTypeClaim    = "https://packline.dev/buildtypes/claim/v1"
)

var gitCommitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// artifactProvenance says what an Artifact run built from: the source as
// written (external) and as resolved (revision), and the resource.
// hfEndpoint is the worker's HF_ENDPOINT, which a spec without an endpoint
// fetches from.
func artifactProvenance(a workerv1.Artifact, revision, hfEndpoint string, started time.Time) sign.Provenance {
	ext := map[string]any{
		"format":      string(a.Format),
		"compression": firstNonEmpty(string(a.Compression), string(v1alpha1.CompressionNone)),
		"target":      map[string]any{"repository": a.Target.Repository, "tag": a.Target.Tag},
	}
	if a.Kitfile != "" {
		ext["kitfileSha256"] = sha256Hex([]byte(a.Kitfile))
	}
	if len(a.Annotations) > 0 {
		ann := map[string]any{}
		for k, v := range a.Annotations {
			ann[k] = v
		}
		ext["annotations"] = ann
	}
	ns := ""
	if a.Signing != nil {
		ext["resource"] = resourceParams(a.Signing.Resource)
		ns = a.Signing.Resource.Namespace
	}
	src, dep := sourceParams(a.Source, hfEndpoint, ns)
	ext["source"] = src
	dep.Digest = revisionDigest(revision)
	p := sign.Provenance{BuildType: BuildTypeArtifact, External: ext, StartedOn: started}
	if dep.URI != "" {
		p.Resolved = []sign.Dependency{dep}
	}
	return builderProvenance(p)
}

// sourceParams are an Artifact source's parameters, each field that
// decides what is fetched (so two sources that can give other content never
// give the same parameters), and the resolved dependency it names. URLs
// lose their user info, query and fragment; Secret references are left
// out, as they name credentials, not content. ns is the resource's
// namespace, the PVC's.
func sourceParams(src v1alpha1.ArtifactSource, hfEndpoint, ns string) (map[string]any, sign.Dependency) {
	switch {
	case src.HuggingFace != nil:
		hf := src.HuggingFace
		// As the fetch picks it (source.fetchHF).
		endpoint := strings.TrimRight(redact.Public(firstNonEmpty(hf.Endpoint, hfEndpoint, source.DefaultHFEndpoint)), "/")
		p := map[string]any{"repo": hf.Repo, "revision": hf.Revision, "endpoint": endpoint}
		setList(p, "include", hf.Include)
		setList(p, "exclude", hf.Exclude)
		return map[string]any{"huggingFace": p}, sign.Dependency{Name: hf.Repo, URI: endpoint + "/" + hf.Repo}
	case src.Git != nil:
		p := map[string]any{"url": redact.Public(src.Git.URL), "ref": src.Git.Ref, "path": src.Git.Path}
		return map[string]any{"git": p}, sign.Dependency{URI: "git+" + redact.Public(src.Git.URL) + "@" + src.Git.Ref}
	case src.HTTP != nil:
		p := map[string]any{"url": redact.Public(src.HTTP.URL)}
		if src.HTTP.SHA256 != "" {
			p["sha256"] = src.HTTP.SHA256
		}
		return map[string]any{"http": p}, sign.Dependency{URI: redact.Public(src.HTTP.URL)}
	case src.OCI != nil:
		p := map[string]any{"reference": src.OCI.Reference}
		if src.OCI.PlainHTTP {
			p["plainHTTP"] = true
		}
		return map[string]any{"oci": p}, sign.Dependency{URI: "oci://" + src.OCI.Reference}
	case src.Volume != nil:
		p := map[string]any{"claimName": src.Volume.ClaimName, "path": src.Volume.Path}
		return map[string]any{"volume": p}, sign.Dependency{URI: "pvc://" + ns + "/" + src.Volume.ClaimName + "/" + src.Volume.Path}
	}
	return map[string]any{}, sign.Dependency{}
}

// setList sets m[k] to vals as a JSON list, when there are any.
func setList(m map[string]any, k string, vals []string) {
	if len(vals) == 0 {
		return
	}
	l := make([]any, len(vals))
	for i, v := range vals {
		l[i] = v
	}
	m[k] = l
}

// claimProvenance says what a Claim render built from: the template's
// repository at its commit, the values (by hash: they are the user's, and
// the manifests hold them anyway), the exposure and the profile.
func claimProvenance(c workerv1.Claim, commit string, started time.Time) sign.Provenance {
	ext := map[string]any{
		"exposure": exposureParams(c.Exposure),
		"target":   map[string]any{"repository": c.Target.Repository, "tag": c.Target.Tag},
	}
	var values []byte
	if c.Values != nil {
		values = c.Values.Raw
	}
	ext["valuesSha256"] = sha256Hex(values)
	internal := map[string]any{}
	if s := c.Signing; s != nil {
		ext["resource"] = resourceParams(s.Resource)
		ext["template"] = s.Template
		if s.Profile != "" {
			internal["profile"] = s.Profile
		}
	}
	src := c.Template.Source
	ext["templateSource"] = map[string]any{"url": redact.Public(src.URL), "ref": src.Ref, "path": src.Path}
	p := sign.Provenance{
		BuildType: BuildTypeClaim, External: ext, Internal: internal, StartedOn: started,
		Resolved: []sign.Dependency{{URI: "git+" + redact.Public(src.URL) + "@" + src.Ref, Digest: revisionDigest(commit)}},
	}
	return builderProvenance(p)
}

// exposureParams is the exposure as rendered: its type (ClusterIP by
// default), and the node port or host when the Claim names one.
func exposureParams(e v1alpha1.Exposure) map[string]any {
	p := map[string]any{"type": firstNonEmpty(string(e.Type), string(v1alpha1.ExposureClusterIP))}
	if e.NodePort != nil {
		p["nodePort"] = float64(*e.NodePort)
	}
	if e.Host != "" {
		p["host"] = e.Host
	}
	return p
}

func resourceParams(r workerv1.Resource) map[string]any {
	return map[string]any{"kind": r.Kind, "namespace": r.Namespace, "name": r.Name, "uid": r.UID, "generation": float64(r.Generation)}
}

// revisionDigest turns a source revision into in-toto digest form: a Git
// or Hugging Face commit, a sha256 (HTTP download, OCI manifest), or a
// volume's listing hash.
func revisionDigest(rev string) map[string]string {
	switch {
	case gitCommitRE.MatchString(rev):
		return map[string]string{"gitCommit": rev}
	case strings.HasPrefix(rev, "sha256:"):
		return map[string]string{"sha256": strings.TrimPrefix(rev, "sha256:")}
	case strings.HasPrefix(rev, "listing:sha256:"):
		return map[string]string{"packlineListingSha256": strings.TrimPrefix(rev, "listing:sha256:")}
	}
	return nil
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
