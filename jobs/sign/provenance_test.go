package sign

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
)

func TestStatement(t *testing.T) {
	d := digest.Digest("sha256:" + "ab12000000000000000000000000000000000000000000000000000000000000")
	commit := "0123456789abcdef0123456789abcdef01234567"
	image := digest.FromString("worker image")
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b, err := Statement("registry.example.com/models/tiny", d, Provenance{
		BuildType:           "https://packline.dev/buildtypes/artifact/v1",
		BuilderID:           "https://packline.dev/worker",
		BuilderVersion:      map[string]string{"packline": "v1.2.3"},
		BuilderDependencies: []Dependency{{Name: "worker-image", URI: "oci://ghcr.io/packline/worker", Digest: map[string]string{"sha256": image.Encoded()}}},
		External:            map[string]any{"format": "ModelKit"},
		Internal:            map[string]any{"resource": map[string]any{"namespace": "team-a", "name": "tiny", "generation": float64(2)}},
		Resolved:            []Dependency{{URI: "git+https://git.example.com/m.git", Digest: map[string]string{"gitCommit": commit}}},
		InvocationID:        "team-a/tiny/g2/a1",
		StartedOn:           start,
		FinishedOn:          start.Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": "registry.example.com/models/tiny", "digest": map[string]any{"sha256": d.Encoded()}}},
		"predicateType": "https://slsa.dev/provenance/v1",
		"predicate": map[string]any{
			"buildDefinition": map[string]any{
				"buildType":            "https://packline.dev/buildtypes/artifact/v1",
				"externalParameters":   map[string]any{"format": "ModelKit"},
				"internalParameters":   map[string]any{"resource": map[string]any{"namespace": "team-a", "name": "tiny", "generation": float64(2)}},
				"resolvedDependencies": []any{map[string]any{"uri": "git+https://git.example.com/m.git", "digest": map[string]any{"gitCommit": commit}}},
			},
			"runDetails": map[string]any{
				"builder": map[string]any{
					"id":                  "https://packline.dev/worker",
					"version":             map[string]any{"packline": "v1.2.3"},
					"builderDependencies": []any{map[string]any{"name": "worker-image", "uri": "oci://ghcr.io/packline/worker", "digest": map[string]any{"sha256": image.Encoded()}}},
				},
				"metadata": map[string]any{"invocationId": "team-a/tiny/g2/a1", "startedOn": "2026-01-02T03:04:05Z", "finishedOn": "2026-01-02T03:05:05Z"},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statement (-want +got):\n%s", diff)
	}
}

func TestStatementRefusesIncompleteProvenance(t *testing.T) {
	d := digest.FromString("x")
	for name, p := range map[string]Provenance{
		"no build type": {BuilderID: "https://packline.dev/worker"},
		"no builder":    {BuildType: "https://packline.dev/buildtypes/artifact/v1"},
	} {
		if _, err := Statement("r.example.com/x", d, p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
