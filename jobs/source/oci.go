package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"os"
	"path/filepath"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	jobsregistry "github.com/packline/packline/jobs/registry"
)

// CopyOCI copies the artifact at s.Reference, unchanged, to dst as tag.
//
// This is the whole of OCI-source support: the artifact keeps its own
// format, manifest and digest (so the Artifact's format and kitfile do not
// apply), and the result's sourceRevision is the source manifest's digest.
// Re-packing another format into ours is not done.
func CopyOCI(ctx context.Context, s v1alpha1.OCISource, pullAuthDir string, dst *remote.Repository, tag string) (ocispec.Descriptor, error) {
	ref, err := registry.ParseReference(s.Reference)
	if err != nil || ref.Reference == "" {
		return ocispec.Descriptor{}, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("oci reference %q: need a tag or digest", s.Reference))
	}
	o := jobsregistry.Options{PlainHTTP: s.PlainHTTP}
	if _, err := os.Stat(filepath.Join(pullAuthDir, "config.json")); err == nil {
		o.DockerConfigDir = pullAuthDir
	}
	src, err := jobsregistry.Repository(ref.Registry+"/"+ref.Repository, o)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if tag == "" {
		tag = ref.Reference
	}
	// oras.Copy already sends only the blobs dst lacks, and reads only
	// those from src. On one registry, those are mounted rather than
	// pulled and pushed, when the source needs no pull credentials (the
	// push credentials then surely may read it; a refused mount would fail
	// the copy).
	opts := oras.DefaultCopyOptions
	if ref.Registry == dst.Reference.Registry && o.DockerConfigDir == "" {
		opts.MountFrom = func(context.Context, ocispec.Descriptor) ([]string, error) {
			return []string{ref.Repository}, nil
		}
	}
	desc, err := oras.Copy(ctx, src, ref.Reference, dst, tag, opts)
	if err != nil && refusedBySource(err) {
		// One copy talks to two registries: a refusal by the source is
		// the pull Secret's to fix, not the push Secret's.
		return ocispec.Descriptor{}, failure.Permanent(workerv1.ReasonSourceAuth, err)
	}
	if err != nil {
		return ocispec.Descriptor{}, failure.Registry(err)
	}
	return desc, nil
}

// refusedBySource reports that the source registry refused the request
// (no or wrong credentials), as opposed to the target.
func refusedBySource(err error) bool {
	var ce *oras.CopyError
	if !errors.As(err, &ce) || ce.Origin != oras.CopyErrorOriginSource {
		return false
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return true
	}
	var resp *errcode.ErrorResponse
	return errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden)
}
