package procnode

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

// imageVolume stands in for the kubelet's image volume (volumes[].image)
// as containerd 2.2 serves it: it pulls the referenced image and unpacks
// its image layers, in order, into dir. Like containerd, it unpacks nothing
// of a manifest whose config is not an image config (a ModelKit or a
// ModelPack): the volume is then an empty folder and the pod still runs
// (mountableLayers). Registries on loopback are spoken to over plain HTTP,
// as the sandbox's are. Entries that would leave dir are refused.
func imageVolume(ctx context.Context, reference, dir string) error {
	repo, err := remote.NewRepository(reference)
	if err != nil {
		return fmt.Errorf("image volume reference %q: %w", reference, err)
	}
	host := repo.Reference.Registry
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	repo.PlainHTTP = host == "localhost" || net.ParseIP(host).IsLoopback()
	desc, rc, err := repo.FetchReference(ctx, repo.Reference.Reference)
	if err != nil {
		return fmt.Errorf("pulling %s: %w", reference, err)
	}
	raw, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s: not an image manifest: %w", reference, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, l := range mountableLayers(m) {
		if err := unpackLayer(ctx, repo, l, dir); err != nil {
			return fmt.Errorf("%s layer %s: %w", reference, l.Digest, err)
		}
	}
	return nil
}

// mountableLayers are the layers containerd 2.2 unpacks into an image
// volume: none unless the config is an image config (it logs "reference
// for unknown type: <config media type>", reads no layer byte, and mounts
// an empty folder; containerd issues #11381 and #11907, and
// TestImageVolumeOfModelKitMountsEmpty on the real node), and then only
// the image layer media types (images.IsLayerType), not an artifact's own.
func mountableLayers(m ocispec.Manifest) []ocispec.Descriptor {
	switch m.Config.MediaType {
	case ocispec.MediaTypeImageConfig, dockerImageConfig:
	default:
		return nil
	}
	var out []ocispec.Descriptor
	for _, l := range m.Layers {
		switch l.MediaType {
		case ocispec.MediaTypeImageLayer, ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayerZstd,
			dockerLayerGzip, dockerLayerForeignGzip:
			out = append(out, l)
		}
	}
	return out
}

// Docker's schema 2 media types, which containerd mounts as well.
const (
	dockerImageConfig      = "application/vnd.docker.container.image.v1+json"
	dockerLayerGzip        = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	dockerLayerForeignGzip = "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
)

func unpackLayer(ctx context.Context, repo *remote.Repository, l ocispec.Descriptor, dir string) error {
	rc, err := repo.Blobs().Fetch(ctx, l)
	if err != nil {
		return err
	}
	defer rc.Close()
	var r io.Reader = content.NewVerifyReader(rc, l)
	switch {
	case strings.HasSuffix(l.MediaType, "gzip"):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	case strings.HasSuffix(l.MediaType, "zstd"):
		zr, err := zstd.NewReader(r)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	case strings.HasSuffix(l.MediaType, "tar"):
	default:
		return nil // a config blob or a non-tar layer: nothing to unpack
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the volume", h.Name)
		}
		target := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777|0o200)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
	}
}
