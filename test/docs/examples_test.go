package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/packline/packline/api/v1alpha1"
)

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestYAMLExamplesDecode: every packline.dev object in a yaml block of the
// README or docs/ decodes strictly into the API's types, so the tutorials
// and guides cannot name a field the API does not have.
func TestYAMLExamplesDecode(t *testing.T) {
	s := scheme(t)
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range YAMLExamples(f, string(b)) {
			ok, err := CheckExample(s, ex)
			if err != nil {
				t.Error(err)
			}
			if ok {
				checked++
			}
		}
	}
	// The tutorials and guides hold at least this many; fewer means the
	// scan broke, not that the docs got shorter.
	if checked < 5 {
		t.Errorf("checked only %d packline.dev examples", checked)
	}
	t.Logf("checked %d packline.dev examples", checked)
}

// TestCheckExampleRejectsUnknownField: a misspelt field in an indented block
// (inside a list item) is reported with its file and line; other APIs'
// objects and fragments are skipped.
func TestCheckExampleRejectsUnknownField(t *testing.T) {
	md := "- step\n\n  ```yaml\n  apiVersion: packline.dev/v1alpha1\n  kind: Claim\n  metadata: {name: x}\n  spec:\n    templateRef: {name: t}\n" +
		"  ---\n  apiVersion: packline.dev/v1alpha1\n  kind: Claim\n  metadata: {name: y}\n  spec:\n    templateRefs: {name: t}\n" +
		"  ---\n  apiVersion: v1\n  kind: Secret\n  bogus: 1\n  ```\n\n```yaml\nkinds:\n  - {kind: Service}\n```\n"
	exs := YAMLExamples("x.md", md)
	if len(exs) != 4 {
		t.Fatalf("got %d examples, want 4: %+v", len(exs), exs)
	}
	s := scheme(t)
	var errs []string
	checked := 0
	for _, ex := range exs {
		ok, err := CheckExample(s, ex)
		if ok {
			checked++
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if checked != 2 || len(errs) != 1 || !strings.HasPrefix(errs[0], "x.md:10: Claim:") || !strings.Contains(errs[0], "templateRefs") {
		t.Errorf("checked %d, errors %q: want 2 checked and one error at x.md:10 naming templateRefs", checked, errs)
	}
}
