// Package pull fetches a pushed manifest by digest and unpacks its layers
// into a folder, verifying every blob against its digest as it streams.
// `kubectl packline pull` and `worker pull` (the init container of a
// binding mounted with InitPull) share it, so a laptop and a pod get the
// same checks.
package pull

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/source"
)

// MaxManifestBytes bounds a manifest or config read into memory.
const MaxManifestBytes = 4 << 20

// Progress hears about a pull: the layer it is on and the bytes read.
type Progress interface {
	Layer(i, n int, total int64)
	Add(n int64)
}

type noProgress struct{}

func (noProgress) Layer(int, int, int64) {}
func (noProgress) Add(int64)             {}

// Pull fetches manifest d from repo, verifies it and its config, and
// unpacks each layer into dir, verifying each layer's digest as it
// streams. It returns the number of layers. On an error, dir may hold a
// part of the layers: the caller empties it.
func Pull(ctx context.Context, repo *remote.Repository, d digest.Digest, dir string, p Progress) (int, error) {
	if p == nil {
		p = noProgress{}
	}
	desc, err := repo.Resolve(ctx, d.String())
	if err != nil {
		return 0, fmt.Errorf("resolving %s: %w", d, err)
	}
	if desc.Digest != d {
		return 0, fmt.Errorf("the registry answered %s for %s", desc.Digest, d)
	}
	if desc.Size > MaxManifestBytes {
		return 0, fmt.Errorf("manifest %s is %d bytes, more than %d", d, desc.Size, MaxManifestBytes)
	}
	mb, err := content.FetchAll(ctx, repo, desc) // verifies size and digest
	if err != nil {
		return 0, fmt.Errorf("fetching manifest %s: %w", d, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil || desc.MediaType != ocispec.MediaTypeImageManifest {
		return 0, fmt.Errorf("%s is a %s, not an OCI image manifest", d, desc.MediaType)
	}
	if m.Config.Size > MaxManifestBytes {
		return 0, fmt.Errorf("config %s is %d bytes, more than %d", m.Config.Digest, m.Config.Size, MaxManifestBytes)
	}
	if _, err := content.FetchAll(ctx, repo, m.Config); err != nil {
		return 0, fmt.Errorf("fetching config %s: %w", m.Config.Digest, err)
	}
	var total int64
	for _, l := range m.Layers {
		total += l.Size
	}
	for i, l := range m.Layers {
		p.Layer(i+1, len(m.Layers), total)
		if err := pullLayer(ctx, repo, l, dir, p); err != nil {
			return 0, fmt.Errorf("layer %d/%d %s (%s): %w", i+1, len(m.Layers), l.Digest, l.MediaType, err)
		}
	}
	return len(m.Layers), nil
}

// pullLayer streams one blob through a digest check into the unpacker;
// the check runs after the stream is read to its end, and a mismatch fails
// the pull (whose caller then empties dir).
func pullLayer(ctx context.Context, repo *remote.Repository, l ocispec.Descriptor, dir string, p Progress) error {
	rc, err := repo.Fetch(ctx, l)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr := content.NewVerifyReader(rc, l)
	r := io.Reader(&countingReader{r: vr, p: p})
	unpackErr := unpack(r, l, dir)
	// Read to the end either way: bytes that do not match the digest are
	// the cause to report, even when they also broke the unpacking.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	if err := vr.Verify(); err != nil {
		if unpackErr != nil {
			return fmt.Errorf("digest check failed: %w (the bytes also failed to unpack: %v)", err, unpackErr)
		}
		return fmt.Errorf("digest check failed: %w", err)
	}
	return unpackErr
}

type countingReader struct {
	r io.Reader
	p Progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.Add(int64(n))
	return n, err
}

// unpack writes one layer: tar layers (plain, gzip or zstd) are unpacked
// with the worker's own contained extractor (jobs/source), keeping file
// modes; any other blob is written as the one file its title or
// model-spec filepath annotation names.
func unpack(r io.Reader, l ocispec.Descriptor, dir string) error {
	mt := l.MediaType
	switch {
	case strings.HasSuffix(mt, ".tar+gzip") || strings.HasSuffix(mt, ".tar.gzip") || mt == ocispec.MediaTypeImageLayerGzip:
		return source.ExtractTar(r, true, dir, source.Limits{})
	case strings.HasSuffix(mt, ".tar+zstd") || mt == ocispec.MediaTypeImageLayerZstd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			return err
		}
		defer zr.Close()
		return source.ExtractTar(zr, false, dir, source.Limits{})
	case strings.HasSuffix(mt, ".tar") || mt == ocispec.MediaTypeImageLayer:
		return source.ExtractTar(r, false, dir, source.Limits{})
	}
	name := l.Annotations[ocispec.AnnotationTitle]
	if name == "" {
		name = l.Annotations[format.AnnotationFilepath]
	}
	if name == "" {
		name = strings.Replace(l.Digest.String(), ":", "-", 1)
	}
	c := path.Clean(strings.ReplaceAll(name, `\`, "/"))
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("layer file name %q leaves the folder", name)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if p := path.Dir(c); p != "." {
		if err := root.MkdirAll(filepath.FromSlash(p), 0o755); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(filepath.FromSlash(c), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
