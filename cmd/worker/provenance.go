package main

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/sign"
	"github.com/packline/packline/jobs/spec"
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
func artifactProvenance(a spec.Artifact, revision string, started time.Time) sign.Provenance {
	ext := map[string]any{
		"format": string(a.Format),
		"target": map[string]any{"repository": a.Target.Repository, "tag": a.Target.Tag},
	}
	if a.Kitfile != "" {
		ext["kitfileSha256"] = sha256Hex([]byte(a.Kitfile))
	}
	if a.Signing != nil {
		ext["resource"] = resourceParams(a.Signing.Resource)
	}
	var dep sign.Dependency
	src := a.Source
	switch {
	case src.HuggingFace != nil:
		endpoint := strings.TrimSuffix(firstNonEmpty(src.HuggingFace.Endpoint, "https://huggingface.co"), "/")
		ext["source"] = map[string]any{"huggingFace": map[string]any{"repo": src.HuggingFace.Repo, "revision": src.HuggingFace.Revision}}
		dep = sign.Dependency{Name: src.HuggingFace.Repo, URI: cleanURL(endpoint) + "/" + src.HuggingFace.Repo, Digest: revisionDigest(revision)}
	case src.Git != nil:
		ext["source"] = map[string]any{"git": map[string]any{"url": cleanURL(src.Git.URL), "ref": src.Git.Ref, "path": src.Git.Path}}
		dep = sign.Dependency{URI: "git+" + cleanURL(src.Git.URL) + "@" + src.Git.Ref, Digest: revisionDigest(revision)}
	case src.HTTP != nil:
		ext["source"] = map[string]any{"http": map[string]any{"url": cleanURL(src.HTTP.URL)}}
		dep = sign.Dependency{URI: cleanURL(src.HTTP.URL), Digest: revisionDigest(revision)}
	case src.OCI != nil:
		ext["source"] = map[string]any{"oci": map[string]any{"reference": src.OCI.Reference}}
		dep = sign.Dependency{URI: "oci://" + src.OCI.Reference, Digest: revisionDigest(revision)}
	case src.Volume != nil:
		ext["source"] = map[string]any{"volume": map[string]any{"claimName": src.Volume.ClaimName, "path": src.Volume.Path}}
		ns := ""
		if a.Signing != nil {
			ns = a.Signing.Resource.Namespace
		}
		dep = sign.Dependency{URI: "pvc://" + ns + "/" + src.Volume.ClaimName + "/" + src.Volume.Path, Digest: revisionDigest(revision)}
	}
	p := sign.Provenance{BuildType: BuildTypeArtifact, External: ext, StartedOn: started}
	if dep.URI != "" {
		p.Resolved = []sign.Dependency{dep}
	}
	return builderProvenance(p)
}

// claimProvenance says what a Claim render built from: the template's
// repository at its commit, the values (by hash: they are the user's, and
// the manifests hold them anyway), the exposure and the profile.
func claimProvenance(c spec.Claim, commit string, started time.Time) sign.Provenance {
	ext := map[string]any{
		"exposure": firstNonEmpty(string(c.Exposure.Type), string(v1alpha1.ExposureClusterIP)),
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
	ext["templateSource"] = map[string]any{"url": cleanURL(src.URL), "ref": src.Ref, "path": src.Path}
	p := sign.Provenance{
		BuildType: BuildTypeClaim, External: ext, Internal: internal, StartedOn: started,
		Resolved: []sign.Dependency{{URI: "git+" + cleanURL(src.URL) + "@" + src.Ref, Digest: revisionDigest(commit)}},
	}
	return builderProvenance(p)
}

func resourceParams(r spec.Resource) map[string]any {
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

// cleanURL drops user info, query and fragment: a pre-signed URL's
// signature or a token must not be written into a public attestation.
func cleanURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
	return u.String()
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
