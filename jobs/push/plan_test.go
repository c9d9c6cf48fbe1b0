package push

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
)

// A ModelPack gives every model file its own layer, typed by model-spec:
// the second shard and an adapter are weights, tokenizer and config files
// are weight.config; other entries keep their kind, one layer each.
func TestPlanModelPack(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"model-1.safetensors":          "a",
		"model-2.safetensors":          "b",
		"adapters/lora.bin":            "c",
		"adapters/adapter_config.json": "{}",
		"adapters/notes.weird":         "?",
		"tokenizer.json":               "{}",
		"data/x.csv":                   "1",
		"README.md":                    "r",
	})
	kf, err := kitfile.Parse([]byte(`
manifestVersion: 1.0.0
model:
  path: model-1.safetensors
  parts: [{path: model-2.safetensors}, {path: adapters}, {path: tokenizer.json}]
datasets: [{path: data}]
docs: [{path: README.md}]
`))
	if err != nil {
		t.Fatal(err)
	}
	stated := func(p string) bool { return p != "README.md" }
	plan, err := planLayers(root, kf, Options{Format: v1alpha1.FormatModelPack, Stated: stated})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Kind     format.Kind
		Path     string
		Untested bool
	}
	var got []row
	for _, l := range plan {
		got = append(got, row{l.kind, l.annotations[format.AnnotationFilepath], l.annotations[format.AnnotationMediaTypeUntested] == "true"})
	}
	want := []row{
		{format.Weight, "model-1.safetensors", false},
		{format.Weight, "model-2.safetensors", false},
		{format.WeightConfig, "adapters/adapter_config.json", false},
		{format.Weight, "adapters/lora.bin", false},
		{format.WeightConfig, "adapters/notes.weird", true},
		{format.WeightConfig, "tokenizer.json", false},
		{format.Dataset, "data", false},
		{format.Doc, "README.md", true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ModelPack layers (-want +got):\n%s", d)
	}
	// A ModelKit keeps one layer per Kitfile entry, without annotations.
	plan, err = planLayers(root, kf, Options{Format: v1alpha1.FormatModelKit})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != len(kf.Entries()) {
		t.Errorf("ModelKit: %d layers for %d entries", len(plan), len(kf.Entries()))
	}
	for _, l := range plan {
		if l.annotations != nil {
			t.Errorf("ModelKit layer %s has annotations", l.path)
		}
	}
}
