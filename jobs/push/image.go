package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
)

// The image view of a model artifact.
//
// containerd (2.1, 2.2) mounts only OCI images as image volumes: given a
// ModelKit or ModelPack it logs "reference for unknown type: <config media
// type>" and mounts an empty folder (containerd issues #11381, #11907). So
// beside each artifact the worker pushes an image manifest over the SAME
// layer blobs: an image config whose rootfs.diff_ids are the layers'
// uncompressed digests, and the layers re-typed as image layers. Only that
// config and manifest are new bytes (ImageStats); no layer is uploaded
// again. The layers' tar paths are the artifact-root-relative paths kit
// unpacks to ("config.json", "models/x.gguf"), so the mounted image shows
// the files where `kit unpack` would put them.
//
// It is tagged ImageTag(artifact digest), "sha256-<hex>.image", as cosign
// names its signatures: it survives garbage collection, needs no tag of
// the artifact's own (a push by digest has one too), and whoever holds the
// artifact digest finds it. It carries AnnotationImageOf, not a subject:
// as a referrer it would show in every listing of the artifact's
// signatures and attestations. kit and ModelPack clients keep reading the
// artifact's manifest, which is unchanged.

// AnnotationImageOf, on the image manifest, is the digest of the artifact
// manifest it is a view of.
const AnnotationImageOf = "dev.packline.image-of"

// ImageTag is the tag of the image view of the artifact manifest subject.
func ImageTag(subject digest.Digest) string {
	return subject.Algorithm().String() + "-" + subject.Encoded() + ".image"
}

// ImageArch is arch, or the worker's own architecture when empty. The
// worker runs on the cluster's nodes, whose architecture containerd
// matches an image against.
func ImageArch(arch string) string {
	if arch == "" {
		return runtime.GOARCH
	}
	return arch
}

// ImageStats say what pushing the image view cost.
type ImageStats struct {
	// ExtraBytes is what was sent: the image config (unless the registry
	// had it) and manifest, all that the view adds; 0 when it was there.
	ExtraBytes int64
}

// imageLayerTypes maps a tar layer's compression suffix to the image layer
// media type containerd unpacks.
var imageLayerTypes = map[string]string{
	"tar":      ocispec.MediaTypeImageLayer,
	"tar+gzip": ocispec.MediaTypeImageLayerGzip,
	"tar+zstd": ocispec.MediaTypeImageLayerZstd,
}

// imageLayerType is the image media type of a ModelKit or ModelPack tar
// layer (".tar", ".tar+gzip", ".tar+zstd"), or false.
func imageLayerType(mediaType string) (string, bool) {
	i := strings.LastIndex(mediaType, ".")
	if i < 0 {
		return "", false
	}
	t, ok := imageLayerTypes[mediaType[i+1:]]
	return t, ok
}

// imageView builds the image config and manifest over layers, whose
// uncompressed digests are diffIDs, for the artifact manifest subject.
// arch is the config's architecture (the worker's: the nodes it runs
// on). The same inputs give the same bytes.
func imageView(subject digest.Digest, layers []ocispec.Descriptor, diffIDs []digest.Digest, arch string) (config, manifest []byte, err error) {
	if len(layers) != len(diffIDs) {
		return nil, nil, fmt.Errorf("%d diff ids for %d layers", len(diffIDs), len(layers))
	}
	out := make([]ocispec.Descriptor, len(layers))
	for i, l := range layers {
		t, ok := imageLayerType(l.MediaType)
		if !ok {
			return nil, nil, fmt.Errorf("layer %d has media type %s, not a tar layer", i, l.MediaType)
		}
		if diffIDs[i] == "" {
			return nil, nil, fmt.Errorf("layer %d (%s) has no diff id", i, l.Digest)
		}
		out[i] = ocispec.Descriptor{MediaType: t, Digest: l.Digest, Size: l.Size, Annotations: l.Annotations}
	}
	config, err = json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: arch},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	})
	if err != nil {
		return nil, nil, err
	}
	manifest, err = json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{
			MediaType: ocispec.MediaTypeImageConfig,
			Digest:    digest.FromBytes(config),
			Size:      int64(len(config)),
		},
		Layers:      out,
		Annotations: map[string]string{AnnotationImageOf: subject.String()},
	})
	return config, manifest, err
}

// diffIDsOf reads the uncompressed digests of m's layers: an uncompressed
// layer's is its digest; a compressed one's is in the config (a ModelKit's
// Kitfile layer infos, a ModelPack's modelfs.diffIds).
func diffIDsOf(m ocispec.Manifest, config []byte) ([]digest.Digest, error) {
	known := map[digest.Digest]digest.Digest{}
	switch m.Config.MediaType {
	case format.KitConfig:
		var kf kitfile.Kitfile
		if err := json.Unmarshal(config, &kf); err != nil {
			return nil, fmt.Errorf("ModelKit config: %w", err)
		}
		for _, e := range kf.Entries() {
			if info := *e.Info; info != nil && info.Digest != "" && info.DiffID != "" {
				known[digest.Digest(info.Digest)] = digest.Digest(info.DiffID)
			}
		}
	case format.ModelPackConfig:
		var cfg struct {
			ModelFS struct {
				DiffIDs []digest.Digest `json:"diffIds"`
			} `json:"modelfs"`
		}
		if err := json.Unmarshal(config, &cfg); err != nil {
			return nil, fmt.Errorf("ModelPack config: %w", err)
		}
		if len(cfg.ModelFS.DiffIDs) == len(m.Layers) {
			for i, l := range m.Layers {
				known[l.Digest] = cfg.ModelFS.DiffIDs[i]
			}
		}
	default:
		return nil, fmt.Errorf("config %s is neither a ModelKit's nor a ModelPack's", m.Config.MediaType)
	}
	out := make([]digest.Digest, len(m.Layers))
	for i, l := range m.Layers {
		switch {
		case strings.HasSuffix(l.MediaType, ".tar"):
			out[i] = l.Digest
		case known[l.Digest] != "":
			out[i] = known[l.Digest]
		default:
			return nil, fmt.Errorf("layer %d (%s) is compressed and the config gives no diff id for it", i, l.Digest)
		}
	}
	return out, nil
}

// pushImageView pushes the image config and manifest and tags the
// manifest ImageTag(subject). A re-run finds the tag on the same digest
// and sends nothing.
func pushImageView(ctx context.Context, repo *remote.Repository, subject digest.Digest, layers []ocispec.Descriptor, diffIDs []digest.Digest, arch string) (ocispec.Descriptor, ImageStats, error) {
	config, manifest, err := imageView(subject, layers, diffIDs, ImageArch(arch))
	if err != nil {
		return ocispec.Descriptor{}, ImageStats{}, err
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}
	tag := ImageTag(subject)
	if cur, err := repo.Resolve(ctx, tag); err == nil && cur.Digest == desc.Digest {
		return desc, ImageStats{}, nil
	}
	st := ImageStats{ExtraBytes: desc.Size}
	cfg := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(config), Size: int64(len(config))}
	exists, err := repo.Exists(ctx, cfg)
	if err != nil {
		return ocispec.Descriptor{}, ImageStats{}, err
	}
	if !exists {
		if err := repo.Push(ctx, cfg, bytes.NewReader(config)); err != nil {
			return ocispec.Descriptor{}, ImageStats{}, err
		}
		st.ExtraBytes += cfg.Size
	}
	if err := repo.PushReference(ctx, desc, bytes.NewReader(manifest), tag); err != nil {
		return ocispec.Descriptor{}, ImageStats{}, err
	}
	return desc, st, nil
}

// maxViewedBytes bounds the manifest and config read by PushImageOf.
const maxViewedBytes = 4 << 20

// PushImageOf pushes the image view of the ModelKit or ModelPack manifest
// desc already in repo (a re-used or copied push), reading its manifest
// and config, never a layer. errNotModel says desc is neither.
func PushImageOf(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, arch string) (ocispec.Descriptor, ImageStats, error) {
	if desc.Size > maxViewedBytes {
		return ocispec.Descriptor{}, ImageStats{}, fmt.Errorf("manifest is %d bytes", desc.Size)
	}
	raw, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		return ocispec.Descriptor{}, ImageStats{}, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return ocispec.Descriptor{}, ImageStats{}, err
	}
	if m.Config.MediaType != format.KitConfig && m.Config.MediaType != format.ModelPackConfig {
		return ocispec.Descriptor{}, ImageStats{}, fmt.Errorf("%w: config %s", ErrNotModel, m.Config.MediaType)
	}
	if m.Config.Size > maxViewedBytes {
		return ocispec.Descriptor{}, ImageStats{}, fmt.Errorf("config is %d bytes", m.Config.Size)
	}
	config, err := content.FetchAll(ctx, repo, m.Config)
	if err != nil {
		return ocispec.Descriptor{}, ImageStats{}, err
	}
	diffIDs, err := diffIDsOf(m, config)
	if err != nil {
		return ocispec.Descriptor{}, ImageStats{}, err
	}
	return pushImageView(ctx, repo, desc.Digest, m.Layers, diffIDs, arch)
}

// ErrNotModel: the manifest is not a ModelKit or ModelPack (an OCI copy
// of something else); it gets no image view.
var ErrNotModel = errors.New("not a ModelKit or ModelPack")
