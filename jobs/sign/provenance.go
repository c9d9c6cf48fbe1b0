package sign

import (
	"fmt"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/opencontainers/go-digest"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Predicate and payload types of the attestation.
const (
	// SLSAProvenanceV1 is what `cosign verify-attestation --type
	// slsaprovenance1` looks for.
	SLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// InTotoPayloadType is the DSSE payload type of an in-toto statement.
	InTotoPayloadType = "application/vnd.in-toto+json"
)

// Dependency is a resolved input or a part of the builder: a URI, and its
// digests by algorithm ("sha256", "gitCommit") when known.
type Dependency struct {
	Name   string
	URI    string
	Digest map[string]string
}

// Provenance is what one worker run records about how it built the
// subject, in SLSA v1 terms.
type Provenance struct {
	// BuildType is a URI naming the kind of run (its parameters' schema).
	BuildType string
	// BuilderID names the builder; BuilderVersion its versions by component.
	BuilderID      string
	BuilderVersion map[string]string
	// BuilderDependencies: the worker image and binary.
	BuilderDependencies []Dependency
	// External are the parameters a user controls (the resource's spec);
	// Internal the ones the platform set (the profile).
	External map[string]any
	Internal map[string]any
	// Resolved are the inputs as fetched: a commit, a sha256.
	Resolved []Dependency
	// InvocationID names this run.
	InvocationID string
	StartedOn    time.Time
	FinishedOn   time.Time
}

// Statement is the in-toto v1 statement, as JSON, saying that p built the
// manifest d of repository.
func Statement(repository string, d digest.Digest, p Provenance) ([]byte, error) {
	pred, err := predicate(p)
	if err != nil {
		return nil, err
	}
	predJSON, err := protojson.Marshal(pred)
	if err != nil {
		return nil, fmt.Errorf("encoding provenance: %w", err)
	}
	predStruct := &structpb.Struct{}
	if err := protojson.Unmarshal(predJSON, predStruct); err != nil {
		return nil, fmt.Errorf("encoding provenance: %w", err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Name: repository, Digest: map[string]string{d.Algorithm().String(): d.Encoded()}}},
		PredicateType: SLSAProvenanceV1,
		Predicate:     predStruct,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("in-toto statement: %w", err)
	}
	return protojson.Marshal(st)
}

// predicate builds and validates the SLSA v1 provenance message.
func predicate(p Provenance) (*slsa.Provenance, error) {
	ext, err := structpb.NewStruct(orEmpty(p.External))
	if err != nil {
		return nil, fmt.Errorf("provenance externalParameters: %w", err)
	}
	var internal *structpb.Struct
	if len(p.Internal) > 0 {
		if internal, err = structpb.NewStruct(p.Internal); err != nil {
			return nil, fmt.Errorf("provenance internalParameters: %w", err)
		}
	}
	meta := &slsa.BuildMetadata{InvocationId: p.InvocationID}
	if !p.StartedOn.IsZero() {
		meta.StartedOn = timestamppb.New(p.StartedOn)
	}
	if !p.FinishedOn.IsZero() {
		meta.FinishedOn = timestamppb.New(p.FinishedOn)
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            p.BuildType,
			ExternalParameters:   ext,
			InternalParameters:   internal,
			ResolvedDependencies: descriptors(p.Resolved),
		},
		RunDetails: &slsa.RunDetails{
			Builder: &slsa.Builder{
				Id:                  p.BuilderID,
				Version:             p.BuilderVersion,
				BuilderDependencies: descriptors(p.BuilderDependencies),
			},
			Metadata: meta,
		},
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("SLSA provenance: %w", err)
	}
	return pred, nil
}

func descriptors(deps []Dependency) []*intoto.ResourceDescriptor {
	out := make([]*intoto.ResourceDescriptor, 0, len(deps))
	for _, d := range deps {
		out = append(out, &intoto.ResourceDescriptor{Name: d.Name, Uri: d.URI, Digest: d.Digest})
	}
	return out
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
