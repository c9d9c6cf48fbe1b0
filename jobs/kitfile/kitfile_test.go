package kitfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tree writes files (name → size) under a temp root and scans it.
func tree(t *testing.T, files map[string]int) *Dir {
	t.Helper()
	root := t.TempDir()
	for name, size := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The cases follow kit init's rules (KitOps pkg/lib/kitfile/generate).
func TestGenerate(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]int
		want  *Kitfile
	}{
		{"sharded model with metadata at the root", map[string]int{
			"README.md": 1, "LICENSE": 1, "config.json": 1, "model-1.safetensors": 100, "model-2.safetensors": 100,
			"data.parquet": 1, "tokenizer.json": 1, "Kitfile": 1,
		}, &Kitfile{
			ManifestVersion: ManifestVersion,
			Model: &Model{Path: "model-1.safetensors", Parts: []ModelPart{
				{Path: "model-2.safetensors"}, {Path: "config.json"}, {Path: "tokenizer.json"},
			}},
			DataSets: []DataSet{{Path: "data.parquet"}},
			Docs:     []Docs{{Path: "LICENSE", Description: "License file"}, {Path: "README.md", Description: "Readme file"}},
		}},
		{"base model and adapter: the largest wins, named", map[string]int{"adapter.bin": 10, "base.gguf": 1000}, &Kitfile{
			ManifestVersion: ManifestVersion,
			Model:           &Model{Name: "base", Path: "base.gguf", Parts: []ModelPart{{Path: "adapter.bin"}}},
		}},
		{"folders are grouped by what they hold", map[string]int{
			"weights/a.safetensors": 5, "weights/config.json": 1,
			"data/train.csv": 1, "data/test.csv": 1, "data/labels.json": 1,
			"docs/guide.txt": 1, "manual/intro.md": 1, "src/x/y.py": 1,
			"tools/convert.py": 1, "mixed/w.bin": 3, "mixed/notes.md": 1,
		}, &Kitfile{
			ManifestVersion: ManifestVersion,
			// 5 > 1.5 × the average 3: the largest is the model, named by its path.
			Model:    &Model{Name: "weights/a", Path: "weights/a.safetensors", Parts: []ModelPart{{Path: "mixed/w.bin"}, {Path: "weights/config.json"}}},
			Code:     []Code{{Path: "src"}, {Path: "mixed"}, {Path: "tools"}},
			DataSets: []DataSet{{Path: "data"}},
			Docs:     []Docs{{Path: "docs"}, {Path: "manual"}},
		}},
		{"a loose file at the root makes a catch-all code entry", map[string]int{
			"model.gguf": 10, "train.py": 1, ".gitattributes": 1, "src/a.py": 1,
		}, &Kitfile{
			ManifestVersion: ManifestVersion,
			Model:           &Model{Name: "model", Path: "model.gguf"},
			Code:            []Code{{Path: "."}},
		}},
		{"no model: metadata is data", map[string]int{"labels.json": 1, "rows.csv": 1}, &Kitfile{
			ManifestVersion: ManifestVersion,
			DataSets:        []DataSet{{Path: "rows.csv"}, {Path: "labels.json"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Generate(tree(t, tc.files))); d != "" {
				t.Errorf("Generate (-want +got):\n%s", d)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	gen := Generate(tree(t, map[string]int{"w.gguf": 10, "config.json": 1, "README.md": 1, "src/x.py": 1}))
	user, err := Parse([]byte(`
package: {name: mine, authors: [me]}
model: {framework: llama.cpp, parts: [{path: config.json, type: config}]}
code: [{path: src, description: the scripts}]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Kitfile{
		ManifestVersion: ManifestVersion,
		Package:         Package{Name: "mine", Authors: []string{"me"}},
		Model:           &Model{Name: "w", Path: "w.gguf", Framework: "llama.cpp", Parts: []ModelPart{{Path: "config.json", Type: "config"}}},
		Code:            []Code{{Path: "src", Description: "the scripts"}},
		Docs:            []Docs{{Path: "README.md", Description: "Readme file"}},
	}
	if d := cmp.Diff(want, Merge(gen, user)); d != "" {
		t.Errorf("Merge (-want +got):\n%s", d)
	}

	// A user folder entry swallows the generated entries inside it.
	gen = Generate(tree(t, map[string]int{"m/a.gguf": 10, "m/b.json": 1, "README.md": 1}))
	user, _ = Parse([]byte("datasets: [{path: m}]\n"))
	got := Merge(gen, user)
	if got.Model != nil || len(got.DataSets) != 1 || len(got.Docs) != 1 {
		t.Errorf("covered entries not dropped: %+v", got)
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	if _, err := Parse([]byte("modle: {path: x}\n")); err == nil {
		t.Fatal("a misspelt field was accepted")
	}
}

func TestValidate(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"a.gguf", "d/b.json"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(root, "link"))
	// A folder outside the root, as a mounted Secret would be, reached
	// through a symlinked parent folder; and a link that stays inside.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "token"), []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("d", filepath.Join(root, "in"))
	cases := []struct {
		name, yaml, wantErr string
	}{
		{"ok", "manifestVersion: 1.0.0\nmodel: {path: a.gguf}\ndatasets: [{path: d}]\n", ""},
		{"no version", "model: {path: a.gguf}\n", "manifestVersion"},
		{"empty", "manifestVersion: 1.0.0\n", "nothing to pack"},
		{"absolute", "manifestVersion: 1.0.0\nmodel: {path: /etc/passwd}\n", "absolute"},
		{"escapes", "manifestVersion: 1.0.0\nmodel: {path: ../x}\n", "leaves the root"},
		{"missing", "manifestVersion: 1.0.0\nmodel: {path: nope.gguf}\n", "does not exist"},
		{"symlink", "manifestVersion: 1.0.0\nmodel: {path: link}\n", "symbolic link"},
		{"symlinked parent", "manifestVersion: 1.0.0\nmodel: {path: out/token}\n", "passes through out, a symbolic link"},
		{"symlinked folder", "manifestVersion: 1.0.0\nmodel: {path: a.gguf}\ndocs: [{path: out}]\n", "symbolic link"},
		{"link inside the root", "manifestVersion: 1.0.0\nmodel: {path: in/b.json}\n", "symbolic link"},
		{"duplicate", "manifestVersion: 1.0.0\nmodel: {path: a.gguf}\ncode: [{path: ./a.gguf}]\n", "already packed"},
		{"nested, as kit allows", "manifestVersion: 1.0.0\nmodel: {path: d/b.json}\ndatasets: [{path: d}]\n", ""},
		// Control and bidirectional characters in what becomes the
		// package's name, written as YAML escapes.
		{"NUL in package.name", "manifestVersion: 1.0.0\npackage: {name: \"a\\0b\"}\nmodel: {path: a.gguf}\n", `package.name "a\x00b" contains U+0000`},
		{"BEL in package.name", "manifestVersion: 1.0.0\npackage: {name: \"a\\ab\"}\nmodel: {path: a.gguf}\n", `package.name "a\ab" contains U+0007`},
		{"ESC in package.name", "manifestVersion: 1.0.0\npackage: {name: \"a\\eb\"}\nmodel: {path: a.gguf}\n", `package.name "a\x1bb" contains U+001B`},
		{"U+202E in package.name", "manifestVersion: 1.0.0\npackage: {name: \"a\\u202Eb\"}\nmodel: {path: a.gguf}\n", `package.name "a\u202eb" contains U+202E`},
		{"U+202E in model.name", "manifestVersion: 1.0.0\nmodel: {path: a.gguf, name: \"fgg\\u202Eu.exe\"}\n", `model.name "fgg\u202eu.exe" contains U+202E`},
		{"unicode letters are fine", "manifestVersion: 1.0.0\npackage: {name: \"modèle-日本\"}\nmodel: {path: a.gguf}\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(k, root)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
