// Package sign signs a pushed manifest with a cosign-compatible key and
// attaches an SLSA v1 provenance attestation to it, in the layout that
// `cosign verify`, `cosign verify-attestation` and Flux's OCIRepository
// spec.verify (provider cosign) read.
//
// # Where signatures live, and why the tag scheme
//
// Two layouts exist: cosign's classic tags (the signature manifest is
// tagged "sha256-<hex>.sig", the attestation manifest "sha256-<hex>.att",
// in the artifact's own repository) and OCI 1.1 referrers (manifests whose
// subject is the artifact, found through the referrers API). We write the
// tags, because every verifier reads them by default and offline with a key:
//
//   - cosign v2.6 `verify --key` and `verify-attestation --key` look up the
//     tags; referrers are read only with --experimental-oci11 (or with the
//     new protobuf bundle format, which `verify --key` does not look for
//     unless --new-bundle-format is passed);
//   - Flux's source-controller verifies with cosign's library: releases
//     built on cosign v2 look up the .sig tag only; v1.9 (cosign v3) first
//     looks for cosign v3 bundles (through referrers or their fallback
//     tag) and, finding none, verifies the .sig tag the same way. The tag
//     is the one layout every Flux v2 release reads with a public key.
//
// Tags also work on registries without the referrers API (distribution
// before v3, many mirrors). The cost is one extra tag per artifact.
//
// The formats are restated from cosign's source (pkg/oci/static,
// pkg/types, pkg/cosign/payload) rather than imported: the cosign module
// would bring hundreds of dependencies (cloud KMS clients, Rekor, TUF) into
// the worker for a few constants.
package sign

import (
	"encoding/json"
	"strings"

	"github.com/opencontainers/go-digest"
)

// Media types and annotations of cosign's tag layout.
const (
	// SimpleSigningMediaType is a signature layer: the payload below, with
	// its signature in AnnotationSignature.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// DSSEMediaType is an attestation layer: a DSSE envelope holding an
	// in-toto statement.
	DSSEMediaType = "application/vnd.dsse.envelope.v1+json"
	// AnnotationSignature holds the base64 signature of a simple-signing
	// layer (empty on attestation layers: the envelope carries it).
	AnnotationSignature = "dev.cosignproject.cosign/signature"
	// AnnotationPredicateType names an attestation layer's predicate, so a
	// verifier can pick layers without opening them.
	AnnotationPredicateType = "predicateType"
	// SignatureTagSuffix and AttestationTagSuffix end the tags.
	SignatureTagSuffix   = ".sig"
	AttestationTagSuffix = ".att"
	// signatureType is the simple-signing payload's critical.type.
	signatureType = "cosign container image signature"
)

// SignatureTag is the tag of d's signature manifest: "sha256-<hex>.sig".
func SignatureTag(d digest.Digest) string { return tagFor(d) + SignatureTagSuffix }

// AttestationTag is the tag of d's attestation manifest: "sha256-<hex>.att".
func AttestationTag(d digest.Digest) string { return tagFor(d) + AttestationTagSuffix }

func tagFor(d digest.Digest) string { return strings.Replace(d.String(), ":", "-", 1) }

// Payload is cosign's simple-signing payload (Red Hat's "atomic container
// signature" format): it names the manifest digest the signature covers.
type Payload struct {
	Critical Critical          `json:"critical"`
	Optional map[string]string `json:"optional"`
}

// Critical is the part of Payload a verifier must check.
type Critical struct {
	Identity struct {
		DockerReference string `json:"docker-reference"`
	} `json:"identity"`
	Image struct {
		DockerManifestDigest string `json:"docker-manifest-digest"`
	} `json:"image"`
	Type string `json:"type"`
}

// SimpleSigningPayload is the payload signed for manifest d in repository
// (without tag or digest). No optional claims: a re-run signs the same bytes.
func SimpleSigningPayload(repository string, d digest.Digest) []byte {
	var p Payload
	p.Critical.Identity.DockerReference = repository
	p.Critical.Image.DockerManifestDigest = d.String()
	p.Critical.Type = signatureType
	b, _ := json.Marshal(p) // a struct of strings always encodes
	return b
}
