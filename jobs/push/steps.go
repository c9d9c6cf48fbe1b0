package push

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
)

// withDefaults fills in Options' defaults and checks the compression.
func withDefaults(o Options) (Options, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 5
	}
	if o.Format == "" {
		o.Format = v1alpha1.FormatModelKit
	}
	if err := format.CheckCompression(o.Compression); err != nil {
		return o, failure.Permanent(workerv1.ReasonInvalidSpec, err)
	}
	return o, nil
}

// run is one Push: its plan, and what each layer became, by plan index.
type run struct {
	repo    *remote.Repository
	plan    []layerPlan
	o       Options
	layers  []ocispec.Descriptor
	diffIDs []digest.Digest
	keys    []string
	done    []bool

	mu sync.Mutex
	st Stats
}

func newRun(repo *remote.Repository, plan []layerPlan, o Options) *run {
	r := &run{repo: repo, plan: plan, o: o, layers: make([]ocispec.Descriptor, len(plan)),
		diffIDs: make([]digest.Digest, len(plan)), keys: make([]string, len(plan)), done: make([]bool, len(plan))}
	for i, l := range plan {
		r.keys[i] = layerKey(l.mediaType, l.items, o.FileID)
	}
	return r
}

func (r *run) logf(format string, args ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, format, args...)
	}
}

// set records layer i as pushed (or found) with desc, and fills in its
// Kitfile layer info.
func (r *run) set(i int, desc ocispec.Descriptor, diffID digest.Digest, s Stats) {
	l := r.plan[i]
	desc.Annotations = l.annotations
	r.layers[i], r.diffIDs[i] = desc, diffID
	if l.info != nil {
		*l.info = &kitfile.LayerInfo{Digest: desc.Digest.String(), DiffID: diffID.String()}
	}
	r.mu.Lock()
	r.st.add(s)
	r.mu.Unlock()
}

// reuseLayers finds the layers an earlier push holds (Previous, by key)
// and marks them done.
func (r *run) reuseLayers(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.o.Concurrency, 8))
	for i, l := range r.plan {
		g.Go(func() error {
			prev, mounted, ok, err := reuse(gctx, r.repo, r.o.Previous, r.keys[i], l.mediaType)
			if err != nil {
				return fmt.Errorf("layer %s: %w", l.path, err)
			}
			if !ok {
				return nil
			}
			s := Stats{Layers: 1, Skipped: 1}
			verb := "already present"
			if mounted {
				s.Mounted, verb = 1, "mounted from "+prev.repo
			}
			r.set(i, prev.desc, prev.diffID, s)
			r.done[i] = true
			r.logf("layer %s %s (%s, %d bytes)\n", l.path, verb, prev.desc.Digest, prev.desc.Size)
			return nil
		})
	}
	return g.Wait()
}

// uploadLayers packs and pushes the layers not done yet, streamed from the
// files, through the local layer cache.
func (r *run) uploadLayers(ctx context.Context, pre prehashes) error {
	c := openCache(r.o.CacheDir)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.o.Concurrency)
	for i, l := range r.plan {
		if r.done[i] {
			continue
		}
		g.Go(func() error {
			// A layer with a key was looked up by it already; the local
			// cache keys on inodes, which a lazy source's placeholders
			// (replaced after planning) would make meaningless.
			lc := c
			if r.keys[i] != "" {
				lc = openCache("")
			}
			desc, diffID, s, err := pushLayer(gctx, r.repo, lc, l.mediaType, l.items, r.o.Compression, pre.layers[i])
			if err != nil {
				return fmt.Errorf("layer %s: %w", l.path, err)
			}
			r.set(i, desc, diffID, s)
			verb := "uploaded"
			if s.Skipped > 0 {
				verb = "already present"
			}
			r.logf("layer %s %s (%s, %d bytes)\n", l.path, verb, desc.Digest, desc.Size)
			return nil
		})
	}
	err := g.Wait()
	if saveErr := c.save(); saveErr != nil {
		r.logf("warning: layer cache not saved: %v\n", saveErr)
	}
	return err
}

// layerKeyNotes returns the layer keys as recorded (layerNotes), "" when
// no layer has one.
func (r *run) layerKeyNotes() string {
	if !slices.ContainsFunc(r.keys, func(k string) bool { return k != "" }) {
		return ""
	}
	return layerNotes(r.keys, r.layers, r.diffIDs)
}

// pushManifest annotates, then pushes the manifest and its image view
// once every layer is there, and saves local layer keys beside them.
func (r *run) pushManifest(ctx context.Context, kf *kitfile.Kitfile) (ocispec.Descriptor, error) {
	o := r.o
	if o.InputKey != "" {
		o.Annotations = withAnnotation(o.Annotations, AnnotationInput, o.InputKey)
	}
	notes := r.layerKeyNotes()
	if notes != "" && !o.LocalFileIDs {
		o.Annotations = withAnnotation(o.Annotations, AnnotationLayerKeys, notes)
	}
	if o.BeforeManifest != nil {
		if err := o.BeforeManifest(); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	manifest, err := buildManifest(ctx, r.repo, kf, r.plan, r.layers, r.diffIDs, o)
	if err != nil {
		return ocispec.Descriptor{}, failure.Registry(err)
	}
	img, ist, err := pushImageView(ctx, r.repo, manifest.Digest, r.layers, r.diffIDs, ImageArch(o.ImageArch))
	if err != nil {
		return ocispec.Descriptor{}, failure.Registry(fmt.Errorf("image view: %w", err))
	}
	r.st.Image, r.st.ImageBytes = img, ist.ExtraBytes
	r.logf("image view %s tagged %s (%d bytes added: config and manifest; no layer)\n", img.Digest, ImageTag(manifest.Digest), ist.ExtraBytes)
	if o.LocalFileIDs && notes != "" {
		// Without them the next run reads every file again; nothing else.
		if err := pushSideKeys(ctx, r.repo, manifest.Digest, notes); err != nil {
			r.logf("warning: layer keys not saved as %s: %v\n", KeysTag(manifest.Digest), err)
		}
	}
	return manifest, nil
}
