package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// compile cross-compiles ./cmd/<command> for plat into dir and returns the
// binary's path. CGO is off so the binary needs no libc on the empty base;
// -trimpath and -buildvcs=false keep host paths and the checkout state out
// of it, so it depends on the sources and toolchain only.
func compile(ctx context.Context, o *Options, command string, plat v1.Platform, dir string) (string, error) {
	out := filepath.Join(dir, fmt.Sprintf("%s-%s-%s%s", command, plat.OS, plat.Architecture, plat.Variant))
	ldflags := "-s -w -X main.version=" + o.Version
	cmd := exec.CommandContext(ctx, "go", "build",
		"-trimpath", "-buildvcs=false", "-ldflags", ldflags,
		"-o", out, "./cmd/"+command)
	cmd.Dir = o.ModuleDir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture,
		// A GOFLAGS from the caller's shell (-race, -cover, -mod) would
		// change the binary and so the digest.
		"GOFLAGS=-mod=readonly",
	)
	if v := goarm(plat); v != "" {
		cmd.Env = append(cmd.Env, "GOARM="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s for %s: %w\n%s", command, plat.String(), err, stderr.String())
	}
	return out, nil
}

// goarm maps an arm variant ("v7") to GOARM ("7").
func goarm(p v1.Platform) string {
	if p.Architecture != "arm" {
		return ""
	}
	return strings.TrimPrefix(p.Variant, "v")
}
