package push

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/packline/packline/jobs/internal/pack"
)

// AnnotationLayerKeys is the manifest annotation that maps each layer to
// what went into it, so that a later run can tell, before fetching a byte,
// which layers it would write again: a JSON array aligned with the
// manifest's layers, each {"key": hex, "diffID": digest} (diffID only when
// the layer is compressed; key empty when a file had no identity). The
// layers themselves stay byte-identical to kit's; only the manifest
// carries this, and only when the keys name content (a Hub sha256, a Git
// blob id, an HTTP sha256): keys from a volume's stat fingerprints go in
// a side manifest with the same annotation (see KeysTag), so that the
// pushed digest follows content only.
const AnnotationLayerKeys = "dev.packline.layer-keys"

// AnnotationInput is the manifest annotation naming everything a push was
// made from, when the source states its revision before any fetch (a Git
// commit, an HTTP sha256): a re-run with the same input key re-uses that
// manifest whole, fetching nothing (see InputKey, ReuseManifest).
const AnnotationInput = "dev.packline.input"

// InputKey is the hex sha256 of v (the spec's source, format,
// compression, Kitfile and annotations, and the revision) and the packer's
// version, as JSON.
func InputKey(v any) (string, error) {
	b, err := json.Marshal(struct {
		Version string `json:"v"`
		Input   any    `json:"input"`
	}{layerKeyVersion, v})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// layerKeyVersion changes whenever the same inputs would give other layer
// bytes (tar writer rules, compressor versions), so old keys stop matching.
const layerKeyVersion = "packline-layer-v1"

// layerKey names a layer's bytes by its inputs: the media type (which says
// the compression), every tar header, and each file's content identity
// from fileID (a Hub LFS sha256, a git blob id, a volume file's stat
// fingerprint). It is "" when some file has no identity.
func layerKey(mediaType string, items []pack.Item, fileID func(string) (string, bool)) string {
	if fileID == nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", layerKeyVersion, mediaType)
	for _, it := range items {
		hd := pack.Header(it)
		fmt.Fprintf(h, "%q %c %o %d %d %d", hd.Name, hd.Typeflag, hd.Mode, hd.Size, hd.Uid, hd.Gid)
		if !it.Dir {
			id, ok := fileID(it.Name)
			if !ok || id == "" {
				return ""
			}
			fmt.Fprintf(h, " %q", id)
		}
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

type layerKeyNote struct {
	Key    string        `json:"key"`
	DiffID digest.Digest `json:"diffID,omitempty"`
}

// Previous is what earlier pushes hold: their layers by key, and the
// repository each was found in (for a cross-repository mount).
type Previous struct {
	layers map[string]prevLayer
	inputs map[string]prevManifest
	// Found lists the manifests read, for logs.
	Found []string
}

type prevManifest struct {
	desc     ocispec.Descriptor
	raw      []byte
	manifest ocispec.Manifest
	repo     string
}

type prevLayer struct {
	desc   ocispec.Descriptor
	diffID digest.Digest
	repo   string // repository path on the same registry
}

func (p *Previous) lookup(key string) (prevLayer, bool) {
	if p == nil || key == "" {
		return prevLayer{}, false
	}
	l, ok := p.layers[key]
	return l, ok
}

// maxManifestBytes bounds a previous manifest we read.
const maxManifestBytes = 4 << 20

// LoadPrevious reads the manifests an earlier run may have pushed: the one
// tag points at in repo, and each reference in refs (status.reference of
// this resource's, or another's, last run: "host/repo@sha256:…"). Only
// references on repo's own registry are read, with repo's credentials: a
// mount works only within one registry, and credentials stay with it.
// Nothing found is not an error; an unreachable registry is, as the push
// would fail anyway.
func LoadPrevious(ctx context.Context, repo *remote.Repository, tag string, refs []string) (*Previous, error) {
	p := &Previous{layers: map[string]prevLayer{}, inputs: map[string]prevManifest{}}
	if tag != "" {
		if err := p.read(ctx, repo, tag); err != nil {
			return p, err
		}
	}
	for _, r := range refs {
		ref, err := registry.ParseReference(r)
		if err != nil || ref.Registry != repo.Reference.Registry || ref.Reference == "" {
			continue
		}
		other := &remote.Repository{Client: repo.Client, Reference: ref, PlainHTTP: repo.PlainHTTP}
		if err := p.read(ctx, other, ref.Reference); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (p *Previous) read(ctx context.Context, repo *remote.Repository, reference string) error {
	desc, rc, err := repo.FetchReference(ctx, reference)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	if desc.MediaType != ocispec.MediaTypeImageManifest || desc.Size > maxManifestBytes {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes))
	if err != nil {
		return err
	}
	var m ocispec.Manifest
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	if k := m.Annotations[AnnotationInput]; k != "" {
		if _, seen := p.inputs[k]; !seen {
			p.inputs[k] = prevManifest{desc: ocispec.Descriptor{MediaType: desc.MediaType, ArtifactType: m.ArtifactType, Digest: desc.Digest, Size: desc.Size}, raw: b, manifest: m, repo: repo.Reference.Repository}
		}
	}
	found := repo.Reference.Repository + "@" + desc.Digest.String()
	if !slices.Contains(p.Found, found) {
		p.Found = append(p.Found, found)
	}
	raw, ok := m.Annotations[AnnotationLayerKeys]
	if !ok {
		// Keys from stat fingerprints live beside the manifest (sidekeys.go).
		if raw, err = readSideKeys(ctx, repo, desc.Digest); err != nil {
			return err
		}
	}
	var notes []layerKeyNote
	if json.Unmarshal([]byte(raw), &notes) != nil || len(notes) != len(m.Layers) {
		return nil
	}
	for i, n := range notes {
		if n.Key == "" {
			continue
		}
		diffID := n.DiffID
		if diffID == "" {
			diffID = m.Layers[i].Digest
		}
		if _, seen := p.layers[n.Key]; !seen {
			p.layers[n.Key] = prevLayer{
				desc:   ocispec.Descriptor{MediaType: m.Layers[i].MediaType, Digest: m.Layers[i].Digest, Size: m.Layers[i].Size},
				diffID: diffID, repo: repo.Reference.Repository,
			}
		}
	}
	return nil
}

func notFound(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return true
	}
	var resp *errcode.ErrorResponse
	return errors.As(err, &resp) && resp.StatusCode == 404
}

// reuse makes the previous layer with key available in repo without
// sending its bytes: it is there already (HEAD), or it is mounted from the
// repository it was found in. ok is false when the layer must be written.
func reuse(ctx context.Context, repo *remote.Repository, prev *Previous, key, mediaType string) (l prevLayer, mounted, ok bool, err error) {
	l, found := prev.lookup(key)
	if !found || l.desc.MediaType != mediaType {
		return l, false, false, nil
	}
	exists, err := repo.Blobs().Exists(ctx, l.desc)
	if err != nil || exists {
		return l, false, exists, err
	}
	if l.repo == repo.Reference.Repository {
		return l, false, false, nil // gone (garbage-collected): write it again
	}
	// A registry without mount support answers with an upload session;
	// nil getContent would then pull the blob and push it back, so refuse
	// that and write it from the source instead.
	err = repo.Mount(ctx, l.desc, l.repo, func() (io.ReadCloser, error) { return nil, errNoMount })
	if errors.Is(err, errNoMount) {
		return l, false, false, nil
	}
	if err != nil {
		var resp *errcode.ErrorResponse
		if errors.As(err, &resp) && resp.StatusCode < 500 {
			return l, false, false, nil // refused (no pull right there): write it
		}
		return l, false, false, err
	}
	return l, true, true, nil
}

var errNoMount = errors.New("registry did not mount the blob")

// ReuseManifest pushes, as tag, the earlier manifest made from the same
// input (AnnotationInput = key), when every blob it needs is in repo or
// can be mounted there: nothing is fetched and no blob is sent. ok is
// false when there is no such manifest or a blob is gone.
func ReuseManifest(ctx context.Context, repo *remote.Repository, prev *Previous, key, tag string) (ocispec.Descriptor, Stats, bool, error) {
	if prev == nil || key == "" {
		return ocispec.Descriptor{}, Stats{}, false, nil
	}
	pm, found := prev.inputs[key]
	if !found {
		return ocispec.Descriptor{}, Stats{}, false, nil
	}
	var st Stats
	for i, d := range append([]ocispec.Descriptor{pm.manifest.Config}, pm.manifest.Layers...) {
		d = ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}
		exists, err := repo.Blobs().Exists(ctx, d)
		if err != nil {
			return ocispec.Descriptor{}, st, false, err
		}
		if !exists && pm.repo != repo.Reference.Repository {
			err = repo.Mount(ctx, d, pm.repo, func() (io.ReadCloser, error) { return nil, errNoMount })
			exists = err == nil
			if exists && i > 0 {
				st.Mounted++
			}
		}
		if !exists {
			return ocispec.Descriptor{}, st, false, nil
		}
		if i > 0 {
			st.Layers++
			st.Skipped++
		}
	}
	if tag == "" {
		return pm.desc, st, true, pushIfMissing(ctx, repo, pm.desc, pm.raw)
	}
	if cur, err := repo.Resolve(ctx, tag); err == nil && cur.Digest == pm.desc.Digest {
		return pm.desc, st, true, nil
	}
	return pm.desc, st, true, repo.PushReference(ctx, pm.desc, bytes.NewReader(pm.raw), tag)
}
