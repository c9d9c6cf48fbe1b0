package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTutorial(t *testing.T) {
	type block struct {
		Mode     Mode
		Reason   string
		Ready    string
		Commands []Command
		Output   []string
	}
	for _, tc := range []struct {
		name     string
		text     string
		requires []string
		blocks   []block
		problems []string
	}{{
		name:     "commands, continuations, heredocs, comments",
		text:     "# T\n<!-- tutorial: requires a.md -->\n```sh\n# a comment\nexport A=1\n\nkubectl get \\\n  pods\nkubectl apply -f - <<'EOF'\nkind: X\n\nEOF\n```\n",
		requires: []string{"a.md"},
		blocks: []block{{Mode: Run, Commands: []Command{
			{Line: 5, Text: "export A=1"},
			{Line: 7, Text: "kubectl get \\\n  pods"},
			{Line: 9, Text: "kubectl apply -f - <<'EOF'\nkind: X\n\nEOF"},
		}}},
	}, {
		name: "skip and background markers",
		text: "<!-- tutorial: skip: krew needs a release -->\n```sh\nkubectl krew install x\n```\n<!-- tutorial: background until \"sandbox: running\" -->\n```sh\nmake demo\n```\n",
		blocks: []block{
			{Mode: Skip, Reason: "krew needs a release", Commands: []Command{{Line: 3, Text: "kubectl krew install x"}}},
			{Mode: Background, Ready: "sandbox: running", Commands: []Command{{Line: 7, Text: "make demo"}}},
		},
	}, {
		name: "a text block right after a sh block is its output; one after prose or yaml is not",
		text: "```sh\na\nb\n```\n\n```text\nNAME  READY\n\nx     True\n```\n```sh\nc\n```\nprose\n```text\nnot c's\n```\n```sh\nd\n```\n```yaml\nk: v\n```\n```text\nnot d's\n```\n",
		blocks: []block{
			{Mode: Run, Commands: []Command{{Line: 2, Text: "a"}, {Line: 3, Text: "b"}}, Output: []string{"NAME  READY", "x     True"}},
			{Mode: Run, Commands: []Command{{Line: 12, Text: "c"}}},
			{Mode: Run, Commands: []Command{{Line: 19, Text: "d"}}},
		},
	}, {
		name:   "yaml, text output and other languages are not commands",
		text:   "```yaml\nkind: X\n```\n```text\nNAME READY\n```\n```go\nfunc f() {}\n```\n",
		blocks: nil,
	}, {
		name: "unmarked commands in other fences fail",
		text: "```\nkubectl get pods\n```\n```bash\nmake demo\n```\n```text\n$ kubectl get claims\nNAME\n```\n",
		problems: []string{
			"t.md:1: ``` block: put a tutorial's commands in a ```sh block, which test/tutorial runs, or mark it <!-- tutorial: skip: REASON -->",
			"t.md:4: ```bash block: put a tutorial's commands in a ```sh block, which test/tutorial runs, or mark it <!-- tutorial: skip: REASON -->",
			"t.md:8: a `$ ` command in a ```text block: put it in a ```sh block (and its output in a ```text block after it)",
		},
	}, {
		name: "bad markers",
		text: "<!-- tutorial: skip: -->\n```sh\nx\n```\n<!-- tutorial: run twice -->\n<!-- tutorial: skip: why -->\nprose\n```sh\ny\n```\n<!-- tutorial: background until \"x\" -->\n```sh\na\nb\n```\n<!-- tutorial: skip: r -->\n```yaml\nk: v\n```\n```sh\ncat <<EOF\nno end\n```\n",
		blocks: []block{
			{Mode: Run, Commands: []Command{{Line: 3, Text: "x"}}},
			{Mode: Run, Commands: []Command{{Line: 9, Text: "y"}}},
			{Mode: Background, Ready: "x", Commands: []Command{{Line: 13, Text: "a"}, {Line: 14, Text: "b"}}},
			{Mode: Run},
		},
		problems: []string{
			"t.md:1: unknown tutorial marker \"skip:\": want `skip: REASON`, `background until \"REGEX\"` or `requires FILE.md`",
			"t.md:5: unknown tutorial marker \"run twice\": want `skip: REASON`, `background until \"REGEX\"` or `requires FILE.md`",
			"t.md:6: a tutorial marker must stand right before a ```sh block",
			"t.md:12: a background block holds one command, not 2",
			"t.md:17: a tutorial marker stands before a ```yaml block: only ```sh blocks hold commands",
			"t.md:20: line 21: heredoc EOF has no terminator line",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := ParseTutorial("t.md", tc.text)
			var blocks []block
			for _, b := range got.Blocks {
				bb := block{Mode: b.Mode, Reason: b.Reason, Commands: b.Commands, Output: b.Output}
				if b.Ready != nil {
					bb.Ready = b.Ready.String()
				}
				blocks = append(blocks, bb)
			}
			if d := cmp.Diff(tc.blocks, blocks); d != "" {
				t.Errorf("blocks (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.requires, got.Requires); d != "" {
				t.Errorf("requires (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.problems, problems); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestMissingOutput(t *testing.T) {
	got := "NAME         READY  VALUES\ncode-server  True   replicas:integer  \nError: refused:\n  spec.values.replicas: maximum: got 9, want 3\n"
	want := []string{"NAME READY VALUES", "code-server  True  replicas:integer", "  spec.values.replicas: maximum: got 9, want 3",
		"code-server  False  replicas:integer", "Error:", "Error: …", "  spec.values.replicas: maximum: got …, want 3", "spec.values.…: got 9, want 4"}
	if d := cmp.Diff([]string{"code-server  False  replicas:integer", "Error:", "spec.values.…: got 9, want 4"}, MissingOutput(want, got)); d != "" {
		t.Errorf("MissingOutput (-want +got):\n%s", d)
	}
}

// TestTutorialsAreMarked: every command in docs/tutorials is in a block
// test/tutorial runs, or skipped with a reason; each tutorial runs
// something, and what it requires exists. test/tutorial runs them on the
// demo; this catches an unmarked command without starting anything.
func TestTutorialsAreMarked(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "tutorials", "*.md"))
	if err != nil || len(files) < 2 {
		t.Fatalf("tutorials: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(f, root+"/")
		tut, problems := ParseTutorial(rel, string(b))
		for _, p := range problems {
			t.Error(p)
		}
		if len(tut.Commands()) == 0 {
			t.Errorf("%s runs no command: a tutorial's steps go in ```sh blocks", rel)
		}
		for _, r := range tut.Requires {
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), r)); err != nil {
				t.Errorf("%s requires %s: %v", rel, r, err)
			}
		}
	}
}
