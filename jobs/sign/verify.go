package sign

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
)

// LoadPublicKey parses a PEM public key as `cosign generate-key-pair`
// writes it (cosign.pub: a PKIX "PUBLIC KEY" block) into its ECDSA key.
func LoadPublicKey(pemBytes []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM \"PUBLIC KEY\" block (cosign.pub)")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the public key: %w", err)
	}
	ec, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("the public key is a %T, not ECDSA (cosign's keys are ECDSA P-256)", k)
	}
	return ec, nil
}

// Verified is what Verify found, all of it signed by the key.
type Verified struct {
	// Signatures counts the valid signatures of the subject.
	Signatures int
	// BuildType, BuilderID and InvocationID are the provenance's.
	BuildType, BuilderID, InvocationID string
	// Resolved are the provenance's resolved dependencies, as URI@digest.
	Resolved []string
}

// Verify checks what Attach wrote, the way `cosign verify --key` and
// `cosign verify-attestation --key --type slsaprovenance1` do, offline: a
// simple-signing payload naming subject, signed by pub, in the .sig
// manifest; and a DSSE envelope signed by pub, in the .att manifest,
// holding an in-toto statement about subject with an SLSA v1 provenance
// predicate. Every blob read is checked against its digest. The error
// says which of the two failed and why.
func Verify(ctx context.Context, t oras.ReadOnlyTarget, subject digest.Digest, pub *ecdsa.PublicKey) (Verified, error) {
	var out Verified
	var errs []string
	n, err := verifySignatures(ctx, t, subject, pub)
	if err != nil {
		errs = append(errs, "signature: "+err.Error())
	}
	out.Signatures = n
	if err := verifyProvenance(ctx, t, subject, pub, &out); err != nil {
		errs = append(errs, "provenance: "+err.Error())
	}
	if len(errs) > 0 {
		return out, errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}

func verifySignatures(ctx context.Context, t oras.ReadOnlyTarget, subject digest.Digest, pub *ecdsa.PublicKey) (int, error) {
	layers, err := taggedLayers(ctx, t, SignatureTag(subject), SimpleSigningMediaType)
	if err != nil {
		return 0, err
	}
	n := 0
	var why []string
	for _, l := range layers {
		payload, err := content.FetchAll(ctx, t, l)
		if err != nil {
			why = append(why, fmt.Sprintf("layer %s: %v", l.Digest, err))
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[AnnotationSignature])
		if err != nil || !ecdsa.VerifyASN1(pub, sha256Sum(payload), sig) {
			why = append(why, fmt.Sprintf("layer %s: not signed by this key", l.Digest))
			continue
		}
		var p Payload
		if err := json.Unmarshal(payload, &p); err != nil {
			why = append(why, fmt.Sprintf("layer %s: payload is not JSON", l.Digest))
			continue
		}
		if p.Critical.Type != signatureType || p.Critical.Image.DockerManifestDigest != subject.String() {
			why = append(why, fmt.Sprintf("layer %s: signs %q, not %s", l.Digest, p.Critical.Image.DockerManifestDigest, subject))
			continue
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("no valid signature of %s by this key in %s (%s)", subject, SignatureTag(subject), strings.Join(why, "; "))
	}
	return n, nil
}

func verifyProvenance(ctx context.Context, t oras.ReadOnlyTarget, subject digest.Digest, pub *ecdsa.PublicKey, out *Verified) error {
	layers, err := taggedLayers(ctx, t, AttestationTag(subject), DSSEMediaType)
	if err != nil {
		return err
	}
	v, err := dsse.NewEnvelopeVerifier(publicDSSE{pub})
	if err != nil {
		return err
	}
	var why []string
	for _, l := range layers {
		if l.Size > maxLayer {
			why = append(why, fmt.Sprintf("layer %s is larger than %d bytes", l.Digest, maxLayer))
			continue
		}
		b, err := content.FetchAll(ctx, t, l)
		if err != nil {
			why = append(why, fmt.Sprintf("layer %s: %v", l.Digest, err))
			continue
		}
		var env dsse.Envelope
		if err := json.Unmarshal(b, &env); err != nil {
			why = append(why, fmt.Sprintf("layer %s: not a DSSE envelope", l.Digest))
			continue
		}
		if _, err := v.Verify(ctx, &env); err != nil {
			why = append(why, fmt.Sprintf("layer %s: not signed by this key", l.Digest))
			continue
		}
		if env.PayloadType != InTotoPayloadType {
			why = append(why, fmt.Sprintf("layer %s: payload type %q", l.Digest, env.PayloadType))
			continue
		}
		stmt, err := env.DecodeB64Payload()
		if err != nil {
			why = append(why, fmt.Sprintf("layer %s: payload: %v", l.Digest, err))
			continue
		}
		if err := readProvenance(stmt, subject, out); err != nil {
			why = append(why, fmt.Sprintf("layer %s: %v", l.Digest, err))
			continue
		}
		return nil
	}
	return fmt.Errorf("no valid SLSA provenance of %s by this key in %s (%s)", subject, AttestationTag(subject), strings.Join(why, "; "))
}

// readProvenance checks that stmt is an SLSA v1 statement about subject.
func readProvenance(stmt []byte, subject digest.Digest, out *Verified) error {
	var st intoto.Statement
	if err := protojson.Unmarshal(stmt, &st); err != nil {
		return fmt.Errorf("not an in-toto statement: %w", err)
	}
	if st.PredicateType != SLSAProvenanceV1 {
		return fmt.Errorf("predicate type %q, not %s", st.PredicateType, SLSAProvenanceV1)
	}
	about := false
	for _, s := range st.Subject {
		if s.Digest[subject.Algorithm().String()] == subject.Encoded() {
			about = true
		}
	}
	if !about {
		return fmt.Errorf("the statement is not about %s", subject)
	}
	pb, err := protojson.Marshal(st.Predicate)
	if err != nil {
		return err
	}
	var p slsa.Provenance
	if err := protojson.Unmarshal(pb, &p); err != nil {
		return fmt.Errorf("predicate: %w", err)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("predicate: %w", err)
	}
	out.BuildType = p.GetBuildDefinition().GetBuildType()
	out.BuilderID = p.GetRunDetails().GetBuilder().GetId()
	out.InvocationID = p.GetRunDetails().GetMetadata().GetInvocationId()
	out.Resolved = nil
	for _, d := range p.GetBuildDefinition().GetResolvedDependencies() {
		s := d.GetUri()
		if s == "" {
			s = d.GetName()
		}
		for alg, v := range d.GetDigest() {
			s += "@" + alg + ":" + v
			break
		}
		out.Resolved = append(out.Resolved, s)
	}
	return nil
}

// taggedLayers are the layers of mediaType in the manifest tagged tag.
func taggedLayers(ctx context.Context, t oras.ReadOnlyTarget, tag, mediaType string) ([]ocispec.Descriptor, error) {
	desc, err := t.Resolve(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, fmt.Errorf("%s: not found in the repository (not signed?)", tag)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	if desc.Size > maxManifest {
		return nil, fmt.Errorf("%s: manifest of %d bytes, more than %d", tag, desc.Size, maxManifest)
	}
	b, err := content.FetchAll(ctx, t, desc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not an OCI manifest: %w", tag, err)
	}
	var out []ocispec.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == mediaType && l.Size <= maxLayer {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no %s layer", tag, mediaType)
	}
	return out, nil
}

// publicDSSE verifies DSSE signatures with a public key.
type publicDSSE struct{ key *ecdsa.PublicKey }

func (p publicDSSE) Verify(_ context.Context, data, sig []byte) error {
	if !ecdsa.VerifyASN1(p.key, sha256Sum(data), sig) {
		return errors.New("signature does not verify")
	}
	return nil
}

func (p publicDSSE) KeyID() (string, error)   { return "", nil }
func (p publicDSSE) Public() crypto.PublicKey { return p.key }
