package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const root = "../.."

// TestRelativeLinks: every relative link and anchor in README.md and
// docs/**/*.md reaches a file and a heading that exist.
func TestRelativeLinks(t *testing.T) {
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v: is docs/ there?", files)
	}
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestReadmeIsShort: the README stays an entry point (what it is, the
// quickstart, install, the two commands, links); the rest goes to docs/.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 220 {
		t.Errorf("README.md has %d lines, more than 220: move the detail into docs/", n)
	}
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Quickstart (make demo)":                                   "quickstart-make-demo",
		"On a real node (`make demo NODE=real`, `make test-node`)": "on-a-real-node-make-demo-nodereal-make-test-node",
		"Who may claim it (admins)":                                "who-may-claim-it-admins",
		"Has anything moved? (`spec.verifyInterval`)":              "has-anything-moved-specverifyinterval",
		"See [the guide](x.md) now":                                "see-the-guide-now",
		"snake_case and Ünïcode":                                   "snake_case-and-ünïcode",
	} {
		if got := Anchor(heading); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestCheckFindsBrokenLinks: the checker reports a missing file, a missing
// anchor (in the same file and in another), and a link out of the tree, and
// ignores links in code and to the web.
func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n[ok](docs/a.md#a-b) [ok](#top) [gone](docs/nope.md) [bad](docs/a.md#nope)\n"+
		"[self](#missing) [out](../x.md) [web](https://example.com/#x) `[code](nope.md)`\n\n```\n[fenced](nope.md)\n```\n")
	write("docs/a.md", "# A b\n\n## A b\n\n[up](../README.md#top) [dup](#a-b-1)\n")
	files, err := MarkdownFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Check(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:3: docs/nope.md: no such file",
		"README.md:3: docs/a.md#nope: no heading in docs/a.md makes #nope",
		"README.md:4: #missing: no heading in README.md makes #missing",
		"README.md:4: ../x.md leaves the repository",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
}
