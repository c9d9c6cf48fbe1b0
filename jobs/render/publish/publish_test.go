package publish

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
)

func TestPackIsReproducible(t *testing.T) {
	ctx := context.Background()
	a := Artifact{
		Layer:    []byte("not really gzip, publish does not care"),
		Source:   "https://git.example.com/templates.git",
		Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567",
		Created:  time.Date(2024, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)),
	}
	store, d1, err := Pack(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	_, d2, err := Pack(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if d1.Digest != d2.Digest {
		t.Fatalf("digests differ: %s, %s", d1.Digest, d2.Digest)
	}
	b, err := content.FetchAll(ctx, store, d1)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{
		"org.opencontainers.image.source":   a.Source,
		"org.opencontainers.image.revision": a.Revision,
		"org.opencontainers.image.created":  "2024-01-02T02:04:05Z",
	}, m.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if m.ArtifactType != "" || m.Config.MediaType != ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != LayerMediaType {
		t.Errorf("manifest shape: artifactType=%q config=%s layers=%v", m.ArtifactType, m.Config.MediaType, m.Layers)
	}

	a.Revision = "main@sha1:fedcba9876543210fedcba9876543210fedcba98"
	_, d3, err := Pack(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if d3.Digest == d1.Digest {
		t.Error("a new revision kept the digest")
	}
}
