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
	"errors"
	"io"
	"slices"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/kitfile"
)

// Options say how to pack and push.
type Options struct {
	Format v1alpha1.PackFormat
	// Compression of the layers; empty is none, kit's default: weights
	// barely compress and gzip costs more CPU than it saves bytes.
	Compression v1alpha1.Compression
	// Concurrency is how many layers upload at once (default 5, kit's
	// --concurrency default; BenchmarkPushConcurrency measured 5 ahead of
	// 3, 2 and 1 on the real registry).
	Concurrency int
	// CacheDir keeps layer digests between runs; empty disables the cache.
	CacheDir string
	// Tag to push the manifest as; empty pushes by digest only.
	Tag string
	// Annotations are added to the manifest; they win over Provenance's.
	Annotations map[string]string
	// Provenance is where the content came from.
	Provenance Provenance
	// Stated reports the Kitfile paths the user named. A ModelPack layer
	// from any other path has a guessed type and says so (see plan).
	Stated func(path string) bool
	// Log, if set, gets one line per layer.
	Log io.Writer
	// BeforeManifest, if set, runs once the layers are uploaded and before
	// the manifest is pushed and tagged; an error stops the push there. The
	// worker waits there for its signing key, so that a key that turns out
	// unusable never leaves an unsigned artifact under the tag.
	BeforeManifest func() error

	// FileID names a file's content by its source's identity (see
	// layerKey). With it, each layer's key is recorded in the manifest
	// (AnnotationLayerKeys) and a layer whose key an earlier push holds
	// (Previous) is not written again.
	FileID func(name string) (string, bool)
	// LocalFileIDs says FileID names files by where they lie, not by
	// their content (a volume's stat fingerprints): the keys then go in a
	// side manifest (KeysTag), never in the pushed one, whose digest
	// must follow content only.
	LocalFileIDs bool
	// Previous holds earlier pushes' layers by key (LoadPrevious).
	Previous *Previous
	// Complete, if set, is called once, before any layer is written, with
	// the files of the layers that must be written: a lazy source
	// (source.Fetched.Complete) fetches them then, and never fetches the
	// files of layers the registry already has. tee gives, for a layer's
	// only file, the writer to copy its downloaded bytes to: the layer is
	// hashed then (pack.Prehash), and not again when it is pushed.
	Complete func(ctx context.Context, names []string, tee func(name string) io.Writer) error
	// Prehashed are layer digests the source computed while it fetched
	// (source.Fetched.Prehashed); a layer whose headers one matches is
	// pushed under it without hashing.
	Prehashed []*pack.Prehash
	// InputKey, if set, is recorded as AnnotationInput (see InputKey).
	InputKey string
	// ImageArch is the architecture in the image view's config (see
	// image.go); empty is the worker's own, runtime.GOARCH.
	ImageArch string
}

// Provenance becomes the manifest's OCI annotations
// (org.opencontainers.image.source, .revision, .created) and the
// ModelPack config's sourceURL, revision and createdAt. Created is the
// source's own time (a commit's), never the time of the run, so that a
// re-run gives the same digest.
type Provenance struct {
	Source   string
	Revision string
	Created  time.Time
}

// Stats say what a push did, for logs, tests and the benchmark.
type Stats struct {
	Layers, Uploaded, Skipped int
	// Mounted counts the skipped layers that were mounted from another
	// repository of the registry.
	Mounted       int
	UploadedBytes int64
	// Prehashed counts the uploaded layers whose digest was computed while
	// their file downloaded, so that the upload hashed nothing.
	Prehashed int
	// Image is the image view of the pushed manifest (see image.go), which
	// containerd mounts as an image volume; ImageBytes what it added (its
	// config and manifest; 0 when it was there already).
	Image      ocispec.Descriptor
	ImageBytes int64
}

// add counts the layers of s into st.
func (st *Stats) add(s Stats) {
	st.Layers += s.Layers
	st.Uploaded += s.Uploaded
	st.Skipped += s.Skipped
	st.Mounted += s.Mounted
	st.UploadedBytes += s.UploadedBytes
	st.Prehashed += s.Prehashed
}

// Push packs kf's entries under root and pushes them to repo. For a
// ModelKit, kf's layer infos are filled in. It returns the manifest's
// descriptor.
func Push(ctx context.Context, repo *remote.Repository, root string, kf *kitfile.Kitfile, o Options) (ocispec.Descriptor, Stats, error) {
	o, err := withDefaults(o)
	if err != nil {
		return ocispec.Descriptor{}, Stats{}, err
	}
	plan, err := planLayers(root, kf, o)
	if err != nil {
		return ocispec.Descriptor{}, Stats{}, failure.Permanent(workerv1.ReasonPackFailed, err)
	}
	r := newRun(repo, plan, o)
	// First the layers an earlier push holds: a HEAD each, or a mount.
	if err := r.reuseLayers(ctx); err != nil {
		return ocispec.Descriptor{}, Stats{}, failure.Registry(err)
	}
	pre := prehash(plan, r.done, o)
	if err := complete(ctx, plan, r.done, o.Complete, pre.tee); err != nil {
		return ocispec.Descriptor{}, Stats{}, err
	}
	// Then the others, streamed from the files.
	if err := r.uploadLayers(ctx, pre); err != nil {
		return ocispec.Descriptor{}, r.st, failure.Registry(err)
	}
	manifest, err := r.pushManifest(ctx, kf)
	return manifest, r.st, err
}

// prehashes are the layers still to write whose digest is known or will
// be by the time they are written, by plan index; byName holds those a
// lazy source's downloads are still to feed, by their file.
type prehashes struct {
	layers map[int]*pack.Prehash
	byName map[string]*pack.Prehash
}

// prehash picks the layers whose digest the source computed already, or
// can compute while their file downloads: uncompressed (a compressed
// layer's digest is of bytes not yet made), one file, and over the size
// packed in memory anyway.
func prehash(plan []layerPlan, done []bool, o Options) prehashes {
	p := prehashes{layers: map[int]*pack.Prehash{}, byName: map[string]*pack.Prehash{}}
	if o.Compression != "" && o.Compression != v1alpha1.CompressionNone {
		return p
	}
	for i, l := range plan {
		if done[i] || small(l.items) {
			continue
		}
		if j := slices.IndexFunc(o.Prehashed, func(h *pack.Prehash) bool { return h.Matches(l.items) }); j >= 0 {
			p.layers[i] = o.Prehashed[j]
			continue
		}
		if o.Complete == nil {
			continue
		}
		if h, ok := pack.NewPrehash(l.items); ok {
			if _, twice := p.byName[h.Name()]; twice {
				continue // cannot happen (a file is in one layer); never guess
			}
			p.layers[i], p.byName[h.Name()] = h, h
		}
	}
	return p
}

func (p prehashes) tee(name string) io.Writer {
	if h := p.byName[name]; h != nil {
		return h
	}
	return nil // not a nil *Prehash in an interface
}

// complete hands the files of the layers still to write to fetch.
func complete(ctx context.Context, plan []layerPlan, done []bool, fetch func(context.Context, []string, func(string) io.Writer) error, tee func(string) io.Writer) error {
	if fetch == nil {
		return nil
	}
	var names []string
	for i, l := range plan {
		if done[i] {
			continue
		}
		for _, it := range l.items {
			if !it.Dir {
				names = append(names, it.Name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fetch(ctx, names, tee)
}

// withAnnotation returns a copy of a with k set to v, unless a sets k.
func withAnnotation(a map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for k, v := range a {
		out[k] = v
	}
	return out
}

// layerNotes is the JSON of AnnotationLayerKeys.
func layerNotes(keys []string, layers []ocispec.Descriptor, diffIDs []digest.Digest) string {
	notes := make([]layerKeyNote, len(keys))
	for i, k := range keys {
		notes[i].Key = k
		if diffIDs[i] != layers[i].Digest {
			notes[i].DiffID = diffIDs[i]
		}
	}
	b, _ := json.Marshal(notes)
	return string(b)
}

// pushLayer uploads one layer unless the cache knows its digest and the
// registry already has it. pre, if set, may know the digest already.
func pushLayer(ctx context.Context, repo *remote.Repository, c *cache, mediaType string, items []pack.Item, comp v1alpha1.Compression, pre *pack.Prehash) (ocispec.Descriptor, digest.Digest, Stats, error) {
	key := cacheKey(mediaType, items)
	var known digest.Digest
	if pre != nil {
		if d, size, ok := pre.Sum(); ok {
			known = d
			c.put(key, cached{Digest: d, DiffID: d, Size: size})
		}
	}
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
	write := func(w io.Writer) error {
		var err error
		diffID, err = pack.Write(w, items, comp)
		return err
	}
	var dgst digest.Digest
	var size int64
	var err error
	uploaded := true
	if small(items) {
		dgst, size, uploaded, err = putSmall(ctx, repo, mediaType, write)
	} else {
		dgst, size, err = streamBlob(ctx, repo, write, known)
		if errors.Is(err, errDigestMismatch) {
			// Not expected; the layer is hashed while sent instead.
			known = ""
			dgst, size, err = streamBlob(ctx, repo, write, "")
		}
	}
	if err != nil {
		return ocispec.Descriptor{}, "", Stats{}, err
	}
	if diffID == "" {
		diffID = dgst
	}
	c.put(key, cached{Digest: dgst, DiffID: diffID, Size: size})
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: dgst, Size: size}
	if !uploaded {
		return desc, diffID, Stats{Layers: 1, Skipped: 1}, nil
	}
	s := Stats{Layers: 1, Uploaded: 1, UploadedBytes: size}
	if known != "" {
		s.Prehashed = 1
	}
	return desc, diffID, s, nil
}

// buildManifest pushes the config, then the manifest (tagged if asked).
func buildManifest(ctx context.Context, repo *remote.Repository, kf *kitfile.Kitfile, plan []layerPlan, layers []ocispec.Descriptor, diffIDs []digest.Digest, o Options) (ocispec.Descriptor, error) {
	var configBytes []byte
	var err error
	if o.Format == v1alpha1.FormatModelPack {
		configBytes, err = json.Marshal(modelPackConfig(kf, plan, diffIDs, o.Provenance))
	} else {
		// As kit's KitFile.MarshalToJSON: compact, fields in struct order.
		configBytes, err = json.Marshal(kf)
	}
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	config := ocispec.Descriptor{
		MediaType: format.ConfigMediaType(o.Format),
		Digest:    digest.FromBytes(configBytes),
		Size:      int64(len(configBytes)),
	}
	if err := pushIfMissing(ctx, repo, config, configBytes); err != nil {
		return ocispec.Descriptor{}, err
	}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: format.ArtifactType(o.Format),
		Config:       config,
		Layers:       layers,
		Annotations:  manifestAnnotations(o),
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
	// A re-run of unchanged content finds the tag already there: a HEAD
	// instead of sending the manifest again.
	if o.Tag != "" {
		if cur, err := repo.Resolve(ctx, o.Tag); err == nil && cur.Digest == desc.Digest {
			return desc, nil
		}
		err = repo.PushReference(ctx, desc, bytes.NewReader(b), o.Tag)
	} else if err = pushIfMissing(ctx, repo, desc, b); err != nil {
		return desc, err
	}
	return desc, err
}

// manifestAnnotations are the provenance annotations OCI defines, then the
// caller's, which win.
func manifestAnnotations(o Options) map[string]string {
	a := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			a[k] = v
		}
	}
	set(ocispec.AnnotationSource, o.Provenance.Source)
	set(ocispec.AnnotationRevision, o.Provenance.Revision)
	if !o.Provenance.Created.IsZero() {
		a[ocispec.AnnotationCreated] = o.Provenance.Created.UTC().Format(time.RFC3339)
	}
	for k, v := range o.Annotations {
		a[k] = v
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

func pushIfMissing(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, b []byte) error {
	exists, err := repo.Exists(ctx, desc)
	if err != nil || exists {
		return err
	}
	return repo.Push(ctx, desc, bytes.NewReader(b))
}
