// Package publish pushes rendered manifests as a single-layer OCI artifact
// in the shape Flux's OCIRepository and Argo CD's OCI source consume: the
// layer is a plain tar+gzip image layer (Argo CD's default allow-list
// includes it; Flux extracts the first layer), the config is Flux's config
// media type with an empty JSON object, and the manifest carries the
// source, revision and creation annotations Flux shows as origin.
package publish

import (
	"context"
	"fmt"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
)

// Media types of the pushed artifact.
const (
	LayerMediaType  = ocispec.MediaTypeImageLayerGzip            // application/vnd.oci.image.layer.v1.tar+gzip
	ConfigMediaType = "application/vnd.cncf.flux.config.v1+json" // what `flux push artifact` writes
)

// emptyConfig is the config blob. Flux never reads it; "{}" is what
// oras and Flux use when there is nothing to say.
var emptyConfig = []byte("{}")

// Artifact is what to push.
type Artifact struct {
	// Layer is the tar+gzip of the manifests.
	Layer []byte
	// Source is the template repository URL, without credentials.
	Source string
	// Revision is "<ref>@sha1:<commit>", or "sha1:<commit>" for a pinned SHA.
	Revision string
	// Created is the commit time, so a re-render of the same commit gives
	// the same manifest.
	Created time.Time
}

// Annotations are the manifest annotations of a.
func (a Artifact) Annotations() map[string]string {
	return map[string]string{
		ocispec.AnnotationSource:   a.Source,
		ocispec.AnnotationRevision: a.Revision,
		ocispec.AnnotationCreated:  a.Created.UTC().Format(time.RFC3339),
	}
}

// Pack builds the artifact in memory and returns the store and the
// manifest descriptor, without touching a registry.
func Pack(ctx context.Context, a Artifact) (*memory.Store, ocispec.Descriptor, error) {
	store := memory.New()
	layer, err := oras.PushBytes(ctx, store, LayerMediaType, a.Layer)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	config, err := oras.PushBytes(ctx, store, ConfigMediaType, emptyConfig)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	desc, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		Layers:              []ocispec.Descriptor{layer},
		ConfigDescriptor:    &config,
		ManifestAnnotations: a.Annotations(),
	})
	if err != nil {
		return nil, ocispec.Descriptor{}, fmt.Errorf("packing manifest: %w", err)
	}
	return store, desc, nil
}

// Push packs a and copies it to dst under tag. Blobs the registry already
// has are skipped by oras.Copy.
func Push(ctx context.Context, a Artifact, dst oras.Target, tag string) (ocispec.Descriptor, error) {
	store, desc, err := Pack(ctx, a)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := store.Tag(ctx, desc, tag); err != nil {
		return ocispec.Descriptor{}, err
	}
	if _, err := oras.Copy(ctx, store, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}
