package docs

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/api/v1alpha1"
)

// Example is one YAML document of a fenced yaml block in a Markdown file.
type Example struct {
	File string
	Line int // of the block's first line
	YAML string
}

// YAMLExamples returns the documents of the ```yaml blocks of a Markdown
// text, dedented by their fence's indentation (blocks inside list items).
func YAMLExamples(file, text string) []Example {
	var out []Example
	var cur []string
	start, indent, in := 0, "", false
	flush := func() {
		doc := strings.Join(cur, "\n")
		if strings.TrimSpace(doc) != "" {
			out = append(out, Example{File: file, Line: start, YAML: doc})
		}
		cur = nil
	}
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case !in && strings.HasPrefix(trimmed, "```yaml"):
			in, start, indent = true, i+2, l[:len(l)-len(strings.TrimLeft(l, " "))]
		case in && strings.HasPrefix(trimmed, "```"):
			flush()
			in = false
		case in && trimmed == "---":
			flush()
			start = i + 2
		case in:
			cur = append(cur, strings.TrimPrefix(l, indent))
		}
	}
	return out
}

// CheckExample decodes a packline.dev example strictly into its Go type, so
// a field the API does not have (renamed, misspelt, moved) is an error. It
// reports whether the example was a packline object.
func CheckExample(s *runtime.Scheme, ex Example) (bool, error) {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal([]byte(ex.YAML), &meta); err != nil || meta.APIVersion != v1alpha1.GroupVersion.String() {
		// A fragment of a spec, or another API's object: not checked here.
		return false, nil
	}
	obj, err := s.New(schema.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: meta.Kind})
	if err != nil {
		return true, fmt.Errorf("%s:%d: %w", ex.File, ex.Line, err)
	}
	if err := yaml.UnmarshalStrict([]byte(ex.YAML), obj); err != nil {
		return true, fmt.Errorf("%s:%d: %s: %w", ex.File, ex.Line, meta.Kind, err)
	}
	return true, nil
}
