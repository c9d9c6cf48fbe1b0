package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/packline/packline/images/imagebuild"
)

// pushWorkerImage builds the worker image exactly as `make images` does
// (package imagebuild: the same base, user and entrypoint), for this host's
// platform only, and pushes it to the sandbox registry. It returns the
// reference by digest that the manager puts into Jobs.
func pushWorkerImage(ctx context.Context, repoRoot, registry string) (string, error) {
	return pushImage(ctx, repoRoot, registry, "worker")
}

// PushManagerImage builds the manager image as `make images` does, for
// this host's platform, pushes it to the sandbox registry and returns its
// reference by digest, for config/default deployed onto the real node.
func (s *Sandbox) PushManagerImage(ctx context.Context) (string, error) {
	return pushImage(ctx, s.o.RepoRoot, s.Registry.Host, "manager")
}

func pushImage(ctx context.Context, repoRoot, registry, command string) (string, error) {
	res, err := imagebuild.Build(ctx, imagebuild.Options{
		ModuleDir: repoRoot,
		Commands:  []string{command},
		Platforms: []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}},
		Version:   "sandbox",
		Source:    "https://github.com/packline/packline",
	})
	if err != nil {
		return "", fmt.Errorf("building the %s image: %w", command, err)
	}
	pub, err := res.Push(ctx, registry+"/packline", "sandbox", true)
	if err != nil {
		return "", err
	}
	return registry + "/packline/" + command + "@" + pub[0].Digest.String(), nil
}

// pushPauseImage builds test/sandbox/pause into a one-layer image and
// pushes it; containerd runs it as every pod's sandbox container.
func pushPauseImage(ctx context.Context, repoRoot, registry, tmp string) (string, error) {
	bin := filepath.Join(tmp, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./test/sandbox/pause")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./test/sandbox/pause: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return "", err
	}
	if _, err := tw.Write(b); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/pause"}
	cf.Config.User = fmt.Sprintf("%d:%d", imagebuild.Nonroot, imagebuild.Nonroot)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	ref, err := name.NewTag(registry+"/packline/pause:sandbox", name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	// containerd pins the sandbox image by this name; a tag keeps it a
	// plain "host/repo:tag" as its configuration expects.
	return strings.TrimPrefix(ref.String(), "index.docker.io/"), nil
}
