// Package push packs a Kitfile's entries as layers and pushes them, with the
// config and manifest of the chosen format, to an OCI registry.
//
// Each layer is tarred straight from the workspace into the upload while
// being hashed (see streamBlob), so the content is read once and never
// copied locally. Layers go up concurrently. A layer whose inputs are
// unchanged since the last push (see cache) is only checked with a HEAD and
// skipped when the registry has it.
package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/pack"
)

// Options say how to pack and push.
type Options struct {
	Format v1alpha1.PackFormat
	// Gzip compresses layers. Off by default: weights barely compress and
	// gzip would cost more CPU than it saves bytes.
	Gzip bool
	// Concurrency is how many layers upload at once (default 3).
	Concurrency int
	// CacheDir keeps layer digests between runs; empty disables the cache.
	CacheDir string
	// Tag to push the manifest as; empty pushes by digest only.
	Tag string
	// Annotations are added to the manifest.
	Annotations map[string]string
	// Log, if set, gets one line per layer.
	Log io.Writer
	// BeforeManifest, if set, runs once the layers are uploaded and before
	// the manifest is pushed and tagged; an error stops the push there. The
	// worker waits there for its signing key, so that a key that turns out
	// unusable never leaves an unsigned artifact under the tag.
	BeforeManifest func() error
}

// Stats say what a push did, for logs, tests and the benchmark.
type Stats struct {
	Layers, Uploaded, Skipped int
	UploadedBytes             int64
}

// Push packs kf's entries under root and pushes them to repo. kf's layer
// infos are filled in. It returns the manifest's descriptor.
func Push(ctx context.Context, repo *remote.Repository, root string, kf *kitfile.Kitfile, o Options) (ocispec.Descriptor, Stats, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 3
	}
	if o.Format == "" {
		o.Format = v1alpha1.FormatModelKit
	}
	entries := kf.Entries()
	layers := make([]ocispec.Descriptor, len(entries))
	diffIDs := make([]digest.Digest, len(entries))
	c := openCache(o.CacheDir)
	var st Stats
	stats := make(chan Stats, len(entries))

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Concurrency)
	for i, e := range entries {
		mediaType := format.LayerMediaType(o.Format, e.Kind, o.Gzip)
		g.Go(func() error {
			items, err := pack.Walk(root, e.Path)
			if err != nil {
				return failure.Permanent(failure.ReasonPackFailed, err)
			}
			desc, diffID, s, err := pushLayer(gctx, repo, c, mediaType, items, o.Gzip)
			if err != nil {
				return fmt.Errorf("layer %s: %w", e.Path, err)
			}
			desc.Annotations = map[string]string{format.AnnotationFilepath: e.Path}
			layers[i], diffIDs[i] = desc, diffID
			*e.Info = &kitfile.LayerInfo{Digest: desc.Digest.String(), DiffID: diffID.String()}
			stats <- s
			if o.Log != nil {
				verb := "uploaded"
				if s.Skipped > 0 {
					verb = "already present"
				}
				fmt.Fprintf(o.Log, "layer %s %s (%s, %d bytes)\n", e.Path, verb, desc.Digest, desc.Size)
			}
			return nil
		})
	}
	err := g.Wait()
	close(stats)
	for s := range stats {
		st.Layers += s.Layers
		st.Uploaded += s.Uploaded
		st.Skipped += s.Skipped
		st.UploadedBytes += s.UploadedBytes
	}
	if saveErr := c.save(); saveErr != nil && o.Log != nil {
		fmt.Fprintf(o.Log, "warning: layer cache not saved: %v\n", saveErr)
	}
	if err != nil {
		return ocispec.Descriptor{}, st, failure.Registry(err)
	}
	if o.BeforeManifest != nil {
		if err := o.BeforeManifest(); err != nil {
			return ocispec.Descriptor{}, st, err
		}
	}

	manifest, err := buildManifest(ctx, repo, kf, layers, diffIDs, o)
	if err != nil {
		return ocispec.Descriptor{}, st, failure.Registry(err)
	}
	return manifest, st, nil
}

// pushLayer uploads one layer unless the cache knows its digest and the
// registry already has it.
func pushLayer(ctx context.Context, repo *remote.Repository, c *cache, mediaType string, items []pack.Item, gz bool) (ocispec.Descriptor, digest.Digest, Stats, error) {
	key := cacheKey(mediaType, items)
	if hit, ok := c.get(key); ok {
		desc := ocispec.Descriptor{MediaType: mediaType, Digest: hit.Digest, Size: hit.Size}
		exists, err := repo.Blobs().Exists(ctx, desc)
		if err != nil {
			return desc, "", Stats{}, err
		}
		if exists {
			return desc, hit.DiffID, Stats{Layers: 1, Skipped: 1}, nil
		}
	}
	var diffID digest.Digest
	dgst, size, err := streamBlob(ctx, repo, func(w io.Writer) error {
		var err error
		diffID, err = pack.Write(w, items, gz)
		return err
	})
	if err != nil {
		return ocispec.Descriptor{}, "", Stats{}, err
	}
	if diffID == "" {
		diffID = dgst
	}
	c.put(key, cached{Digest: dgst, DiffID: diffID, Size: size})
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: dgst, Size: size}
	return desc, diffID, Stats{Layers: 1, Uploaded: 1, UploadedBytes: size}, nil
}

// buildManifest pushes the config, then the manifest (tagged if asked).
func buildManifest(ctx context.Context, repo *remote.Repository, kf *kitfile.Kitfile, layers []ocispec.Descriptor, diffIDs []digest.Digest, o Options) (ocispec.Descriptor, error) {
	kfJSON, err := json.Marshal(kf)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	annotations := map[string]string{}
	for k, v := range o.Annotations {
		annotations[k] = v
	}
	configBytes := kfJSON
	if o.Format == v1alpha1.FormatModelPack {
		if configBytes, err = json.Marshal(modelPackConfig(kf, diffIDs)); err != nil {
			return ocispec.Descriptor{}, err
		}
		// kit reads the Kitfile from here to unpack a ModelPack to its paths.
		annotations[format.KitAnnotationKitfile] = string(kfJSON)
	}
	config := ocispec.Descriptor{
		MediaType: format.ConfigMediaType(o.Format),
		Digest:    digest.FromBytes(configBytes),
		Size:      int64(len(configBytes)),
	}
	if err := pushIfMissing(ctx, repo, config, configBytes); err != nil {
		return ocispec.Descriptor{}, err
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: format.ArtifactType(o.Format),
		Config:       config,
		Layers:       layers,
		Annotations:  annotations,
	}
	b, err := json.Marshal(m)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := ocispec.Descriptor{
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: m.ArtifactType,
		Digest:       digest.FromBytes(b),
		Size:         int64(len(b)),
	}
	if o.Tag != "" {
		err = repo.PushReference(ctx, desc, bytes.NewReader(b), o.Tag)
	} else {
		err = repo.Push(ctx, desc, bytes.NewReader(b))
	}
	return desc, err
}

func pushIfMissing(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, b []byte) error {
	exists, err := repo.Exists(ctx, desc)
	if err != nil || exists {
		return err
	}
	return repo.Push(ctx, desc, bytes.NewReader(b))
}

// modelPackConfig fills the model-spec config from the Kitfile. createdAt is
// left out on purpose: a timestamp would change the digest of every run.
func modelPackConfig(kf *kitfile.Kitfile, diffIDs []digest.Digest) map[string]any {
	desc := map[string]any{}
	set := func(k, v string) {
		if v != "" {
			desc[k] = v
		}
	}
	set("name", kf.Package.Name)
	set("version", kf.Package.Version)
	set("description", kf.Package.Description)
	if len(kf.Package.Authors) > 0 {
		desc["authors"] = kf.Package.Authors
	}
	var licenses []string
	for _, l := range []string{kf.Package.License, modelField(kf, func(m *kitfile.Model) string { return m.License })} {
		if l != "" && !contains(licenses, l) {
			licenses = append(licenses, l)
		}
	}
	sort.Strings(licenses)
	if len(licenses) > 0 {
		desc["licenses"] = licenses
	}
	cfg := map[string]any{}
	if f := modelField(kf, func(m *kitfile.Model) string { return m.Format }); f != "" {
		cfg["format"] = f
	}
	return map[string]any{
		"descriptor": desc,
		"modelfs":    map[string]any{"type": "layers", "diffIds": diffIDs},
		"config":     cfg,
	}
}

func modelField(kf *kitfile.Kitfile, f func(*kitfile.Model) string) string {
	if kf.Model == nil {
		return ""
	}
	return f(kf.Model)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
