package push

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
)

// Layer keys made from file identities that are not content (a volume
// file's stat fingerprint: size, times, inode, device) must not shape the
// pushed manifest: a `cp -a` copy or a chmod to the same mode would then
// give identical config and layers a new digest, and so a new signature and
// a GitOps rollout. They are kept beside it instead, in a side manifest
// tagged KeysTag(subject), the way cosign keeps a signature in
// "sha256-<hex>.sig": no workspace is needed (the default reclaim policy
// frees it after success), and a later run finds them from the same tag or
// reference it reads the subject from.
//
// The side manifest has no subject field: with one, oras-go would also
// maintain the OCI 1.1 referrers fallback tag ("sha256-<hex>") on a
// registry without the referrers API, one more object for a cache.

// ArtifactTypeLayerKeys is the side manifest's artifactType.
const ArtifactTypeLayerKeys = "application/vnd.packline.layer-keys.v1+json"

// KeysTag is the tag of the side manifest holding the layer keys of the
// manifest subject.
func KeysTag(subject digest.Digest) string {
	return subject.Algorithm().String() + "-" + subject.Encoded() + ".keys"
}

// emptyJSON is the "{}" blob's descriptor, without its data inlined.
var emptyJSON = ocispec.Descriptor{MediaType: ocispec.MediaTypeEmptyJSON, Digest: ocispec.DescriptorEmptyJSON.Digest, Size: ocispec.DescriptorEmptyJSON.Size}

// sideKeysManifest is the side manifest for notes (the JSON of
// AnnotationLayerKeys): the empty config and layer that OCI 1.1 prescribes
// for an artifact with no content of its own, and the notes as its
// annotation.
func sideKeysManifest(notes string) ([]byte, ocispec.Descriptor, error) {
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactTypeLayerKeys,
		Config:       emptyJSON,
		Layers:       []ocispec.Descriptor{emptyJSON},
		Annotations:  map[string]string{AnnotationLayerKeys: notes},
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	return b, ocispec.Descriptor{MediaType: m.MediaType, ArtifactType: m.ArtifactType, Digest: digest.FromBytes(b), Size: int64(len(b))}, nil
}

// pushSideKeys tags the side manifest for subject, unless the tag names it
// already (an unchanged re-run sends nothing).
func pushSideKeys(ctx context.Context, repo *remote.Repository, subject digest.Digest, notes string) error {
	b, desc, err := sideKeysManifest(notes)
	if err != nil {
		return err
	}
	tag := KeysTag(subject)
	if cur, err := repo.Resolve(ctx, tag); err == nil && cur.Digest == desc.Digest {
		return nil
	}
	if err := pushIfMissing(ctx, repo, emptyJSON, ocispec.DescriptorEmptyJSON.Data); err != nil {
		return err
	}
	return repo.PushReference(ctx, desc, bytes.NewReader(b), tag)
}

// readSideKeys returns the notes of subject's side manifest in repo; ""
// when there is none or it is not one of ours.
func readSideKeys(ctx context.Context, repo *remote.Repository, subject digest.Digest) (string, error) {
	desc, rc, err := repo.FetchReference(ctx, KeysTag(subject))
	if notFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if desc.MediaType != ocispec.MediaTypeImageManifest || desc.Size > maxManifestBytes {
		return "", nil
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes))
	if err != nil {
		return "", err
	}
	var m ocispec.Manifest
	if json.Unmarshal(b, &m) != nil || m.ArtifactType != ArtifactTypeLayerKeys {
		return "", nil
	}
	return m.Annotations[AnnotationLayerKeys], nil
}
