// Package imagebuild builds packline's container images without a container
// daemon: Go binaries cross-compiled per platform, laid on an empty base with
// only what a static Go program needs (CA certificates, a nonroot user), and
// assembled into one multi-platform OCI index per command with
// go-containerregistry.
//
// Builds are reproducible: every timestamp is the commit time, tar entries
// are sorted with fixed owners and modes, and the binaries are built with
// -trimpath and without VCS stamping, so the same commit and toolchain give
// the same digests.
package imagebuild

import (
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Nonroot is the uid and gid the images run as; it is distroless's
// "nonroot", so the Dockerfile and the daemonless build agree and
// runAsUser: 65532 in the manifests matches both.
const Nonroot = 65532

// DefaultCACerts is where Debian and Ubuntu keep the CA bundle.
const DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"

// Options describe one build.
type Options struct {
	// ModuleDir is the Go module to build from (the repository root).
	ModuleDir string
	// Commands are the names under ./cmd to build, e.g. "manager", "worker";
	// each becomes an image whose entrypoint is /<name>.
	Commands []string
	// Platforms are the linux platforms of every image's index.
	Platforms []v1.Platform
	// Version goes into the binaries (-X main.version) and the version label.
	Version string
	// Revision is the source commit, for the revision label.
	Revision string
	// Source is the repository URL, for the source label.
	Source string
	// Created stamps the config, history and every file in the layers.
	Created time.Time
	// CACerts is the PEM bundle copied to /etc/ssl/certs.
	CACerts string
	// Log receives progress lines; nil is quiet.
	Log func(format string, args ...any)
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// ParsePlatforms reads "linux/amd64,linux/arm64"; only linux makes sense for
// a Kubernetes image, so anything else is an error rather than a surprise.
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		if plat.OS != "linux" || plat.Architecture == "" {
			return nil, fmt.Errorf("platform %q: want linux/<arch>", p)
		}
		if seen[plat.String()] {
			return nil, fmt.Errorf("platform %q given twice", p)
		}
		seen[plat.String()] = true
		out = append(out, *plat)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q", s)
	}
	return out, nil
}

// Labels are the OCI annotation keys set on configs and indexes.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
)

func (o *Options) labels(command string) map[string]string {
	return map[string]string{
		LabelSource:   o.Source,
		LabelRevision: o.Revision,
		LabelVersion:  o.Version,
		LabelCreated:  o.Created.UTC().Format(time.RFC3339),
		LabelTitle:    "packline-" + command,
	}
}
