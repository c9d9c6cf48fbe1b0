package sandbox

import (
	"context"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
)

// Pulled is what Pull fetched.
type Pulled struct {
	Manifest ocispec.Descriptor
	Blobs    int
	Bytes    int64
}

// Pull copies reference (repo@sha256:…) with everything it points at from
// the sandbox registry into memory: oras verifies each digest on the way,
// so success proves the artifact is there and intact.
func (s *Sandbox) Pull(ctx context.Context, reference string) (Pulled, error) {
	repo, err := remote.NewRepository(reference)
	if err != nil {
		return Pulled{}, err
	}
	repo.PlainHTTP = repo.Reference.Registry == s.Registry.Host
	store := memory.New()
	var out Pulled
	opts := oras.DefaultCopyOptions
	opts.PostCopy = func(_ context.Context, d ocispec.Descriptor) error {
		out.Blobs++
		out.Bytes += d.Size
		return nil
	}
	desc, err := oras.Copy(ctx, repo, repo.Reference.Reference, store, "", opts)
	if err != nil {
		return out, fmt.Errorf("pulling %s: %w", reference, err)
	}
	out.Manifest = desc
	return out, nil
}
