package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The MultiKueue how-to quotes config/samples/multikueue, which the
// sandbox and test/e2e/multikueue apply: every quoted file must be quoted
// whole and as it is, and every file of the folder quoted, so the docs
// show what the tests run.
func TestMultiKueueDocsQuoteSamples(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "how-to", "worker-clusters-multikueue.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)<!-- file: ([^ ]+) -->\n```yaml\n(.*?)```\n").FindAllSubmatch(doc, -1) {
		quoted[string(m[1])] = string(m[2])
	}
	files, err := filepath.Glob(filepath.Join(root, MultiKueueSamples, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", MultiKueueSamples, err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		q, ok := quoted[rel]
		if !ok {
			t.Errorf("%s is not quoted in the how-to", rel)
			continue
		}
		if q != string(b) {
			t.Errorf("the how-to's quote of %s differs from the file", rel)
		}
		delete(quoted, rel)
	}
	for f := range quoted {
		t.Errorf("the how-to quotes %s, which is not in %s", f, MultiKueueSamples)
	}
}
