package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
)

// maxManifest and maxLayer bound what is read back from the registry: a
// signature manifest lists a handful of layers, each a few KiB.
const (
	maxManifest = 4 << 20
	maxLayer    = 4 << 20
)

// Signer signs manifests with one ECDSA P-256 key.
type Signer struct {
	key *ecdsa.PrivateKey
}

// NewSigner returns a Signer for key (see LoadKey).
func NewSigner(key *ecdsa.PrivateKey) *Signer { return &Signer{key: key} }

// Attached is what Attach pushed (or found already there).
type Attached struct {
	// Signature is the digest of the "sha256-<hex>.sig" manifest.
	Signature digest.Digest
	// Attestation is the digest of the "sha256-<hex>.att" manifest.
	Attestation digest.Digest
}

// PushError is a registry failure while attaching: the artifact is
// already pushed, only its signature or attestation is missing.
type PushError struct {
	Tag string
	Err error
}

func (e *PushError) Error() string { return fmt.Sprintf("pushing %s: %v", e.Tag, e.Err) }
func (e *PushError) Unwrap() error { return e.Err }

// Attach signs subject (a manifest of repository, pushed to t) and attaches
// statement (see Statement) as a DSSE attestation.
//
// A signature by the same key already on the subject is kept as it is, so
// a re-run does not move the .sig tag. An attestation by the same key is
// replaced by the new one; other signers' signatures and attestations are
// kept, as cosign does.
//
// The two are independent manifests, pushed at the same time: each is a
// few round trips, which is most of what signing costs.
func (s *Signer) Attach(ctx context.Context, t oras.Target, repository string, subject digest.Digest, statement []byte) (Attached, error) {
	var out Attached
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		out.Signature, err = s.attachSignature(gctx, t, repository, subject)
		return err
	})
	g.Go(func() (err error) {
		out.Attestation, err = s.attachAttestation(gctx, t, subject, statement)
		return err
	})
	if err := g.Wait(); err != nil {
		return Attached{}, err
	}
	return out, nil
}

func (s *Signer) attachSignature(ctx context.Context, t oras.Target, repository string, subject digest.Digest) (digest.Digest, error) {
	tag := SignatureTag(subject)
	payload := SimpleSigningPayload(repository, subject)
	existing, existingDesc, err := fetchManifest(ctx, t, tag)
	if err != nil {
		return "", &PushError{Tag: tag, Err: err}
	}
	for _, l := range existing.Layers {
		if l.MediaType == SimpleSigningMediaType && l.Digest == digest.FromBytes(payload) && s.verifies(payload, l.Annotations[AnnotationSignature]) {
			return existingDesc.Digest, nil
		}
	}
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, sha256Sum(payload))
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	layer := layerDescriptor(SimpleSigningMediaType, payload, map[string]string{AnnotationSignature: base64.StdEncoding.EncodeToString(sig)})
	d, err := pushManifest(ctx, t, tag, append(existing.Layers, layer), map[digest.Digest][]byte{layer.Digest: payload})
	if err != nil {
		return "", &PushError{Tag: tag, Err: err}
	}
	return d, nil
}

func (s *Signer) attachAttestation(ctx context.Context, t oras.Target, subject digest.Digest, statement []byte) (digest.Digest, error) {
	tag := AttestationTag(subject)
	env, err := s.envelope(ctx, statement)
	if err != nil {
		return "", err
	}
	existing, _, err := fetchManifest(ctx, t, tag)
	if err != nil {
		return "", &PushError{Tag: tag, Err: err}
	}
	var keep []ocispec.Descriptor
	for _, l := range existing.Layers {
		if l.MediaType == DSSEMediaType && s.ownEnvelope(ctx, t, l) {
			continue
		}
		keep = append(keep, l)
	}
	layer := layerDescriptor(DSSEMediaType, env, map[string]string{AnnotationPredicateType: SLSAProvenanceV1, AnnotationSignature: ""})
	d, err := pushManifest(ctx, t, tag, append(keep, layer), map[digest.Digest][]byte{layer.Digest: env})
	if err != nil {
		return "", &PushError{Tag: tag, Err: err}
	}
	return d, nil
}

// envelope signs statement as a DSSE envelope (the signature covers the
// pre-authentication encoding of type and payload, not the JSON).
func (s *Signer) envelope(ctx context.Context, statement []byte) ([]byte, error) {
	es, err := dsse.NewEnvelopeSigner(ecdsaDSSE{s.key})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, InTotoPayloadType, statement)
	if err != nil {
		return nil, fmt.Errorf("signing the attestation: %w", err)
	}
	return json.Marshal(env)
}

// ownEnvelope reports whether layer is a DSSE envelope signed by our key.
func (s *Signer) ownEnvelope(ctx context.Context, t oras.Target, layer ocispec.Descriptor) bool {
	if layer.Size > maxLayer {
		return false
	}
	b, err := content.FetchAll(ctx, t, layer)
	if err != nil {
		return false
	}
	var env dsse.Envelope
	if json.Unmarshal(b, &env) != nil {
		return false
	}
	v, err := dsse.NewEnvelopeVerifier(ecdsaDSSE{s.key})
	if err != nil {
		return false
	}
	_, err = v.Verify(ctx, &env)
	return err == nil
}

func (s *Signer) verifies(payload []byte, sigB64 string) bool {
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	return err == nil && ecdsa.VerifyASN1(&s.key.PublicKey, sha256Sum(payload), sig)
}

// ecdsaDSSE is the key as a DSSE signer and verifier: ECDSA over SHA-256,
// ASN.1 signatures, as cosign's own DSSE wrapper produces. No key ID:
// verification is by the public key given to cosign.
type ecdsaDSSE struct{ key *ecdsa.PrivateKey }

func (e ecdsaDSSE) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ecdsa.SignASN1(rand.Reader, e.key, sha256Sum(data))
}

func (e ecdsaDSSE) Verify(_ context.Context, data, sig []byte) error {
	if !ecdsa.VerifyASN1(&e.key.PublicKey, sha256Sum(data), sig) {
		return errors.New("signature does not verify")
	}
	return nil
}

func (e ecdsaDSSE) KeyID() (string, error)   { return "", nil }
func (e ecdsaDSSE) Public() crypto.PublicKey { return &e.key.PublicKey }

func sha256Sum(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

func layerDescriptor(mediaType string, b []byte, annotations map[string]string) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b)), Annotations: annotations}
}

// fetchManifest reads the manifest tagged tag; a missing tag is an empty
// manifest, not an error.
func fetchManifest(ctx context.Context, t oras.Target, tag string) (ocispec.Manifest, ocispec.Descriptor, error) {
	desc, err := t.Resolve(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return ocispec.Manifest{}, ocispec.Descriptor{}, nil
	}
	if err != nil {
		return ocispec.Manifest{}, ocispec.Descriptor{}, err
	}
	if desc.Size > maxManifest {
		return ocispec.Manifest{}, ocispec.Descriptor{}, fmt.Errorf("manifest %s is %d bytes, more than %d", tag, desc.Size, maxManifest)
	}
	b, err := content.FetchAll(ctx, t, desc)
	if err != nil {
		return ocispec.Manifest{}, ocispec.Descriptor{}, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		// Not ours to fix: replace it rather than fail every run.
		return ocispec.Manifest{}, ocispec.Descriptor{}, nil
	}
	return m, desc, nil
}

// pushManifest pushes the new layers' blobs, a config listing every
// layer (as cosign's images have), and the manifest, tagged.
func pushManifest(ctx context.Context, t oras.Target, tag string, layers []ocispec.Descriptor, blobs map[digest.Digest][]byte) (digest.Digest, error) {
	for _, l := range layers {
		if b, ok := blobs[l.Digest]; ok {
			if err := pushBlob(ctx, t, l, b); err != nil {
				return "", err
			}
		}
	}
	cfg := ocispec.Image{RootFS: ocispec.RootFS{Type: "layers"}}
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.Digest)
	}
	cfgBytes, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	cfgDesc := layerDescriptor(ocispec.MediaTypeImageConfig, cfgBytes, nil)
	if err := pushBlob(ctx, t, cfgDesc, cfgBytes); err != nil {
		return "", err
	}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfgDesc, Layers: layers}
	mb, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	desc, err := oras.TagBytes(ctx, t, ocispec.MediaTypeImageManifest, mb, tag)
	if err != nil {
		return "", err
	}
	return desc.Digest, nil
}

// pushBlob uploads b without asking first: these blobs are a few KiB, and
// mostly new, so the upload costs what the check would.
func pushBlob(ctx context.Context, t oras.Target, desc ocispec.Descriptor, b []byte) error {
	err := t.Push(ctx, desc, bytes.NewReader(b))
	if errors.Is(err, errdef.ErrAlreadyExists) {
		return nil
	}
	return err
}
