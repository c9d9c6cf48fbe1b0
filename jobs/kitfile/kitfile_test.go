package kitfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGenerate(t *testing.T) {
	cases := []struct {
		name  string
		files []File
		want  *Kitfile
	}{
		{"sharded model with metadata", []File{
			{"README.md", 1}, {"LICENSE", 1}, {"config.json", 1}, {"model-1.safetensors", 100}, {"model-2.safetensors", 100},
			{"train.py", 1}, {"data.parquet", 1}, {"tokenizer.json", 1},
		}, &Kitfile{
			ManifestVersion: ManifestVersion,
			Model: &Model{Name: "model-1", Path: "model-1.safetensors", Parts: []ModelPart{
				{Path: "config.json"}, {Path: "model-2.safetensors"}, {Path: "tokenizer.json"},
			}},
			Code:     []Code{{Path: "train.py"}},
			DataSets: []DataSet{{Path: "data.parquet"}},
			Docs:     []Docs{{Path: "README.md", Description: "Readme file"}, {Path: "LICENSE", Description: "License file"}},
		}},
		{"base model and adapter: the largest wins", []File{{"adapter.bin", 10}, {"base.gguf", 1000}}, &Kitfile{
			ManifestVersion: ManifestVersion,
			Model:           &Model{Name: "base", Path: "base.gguf", Parts: []ModelPart{{Path: "adapter.bin"}}},
		}},
		{"no model: metadata is data", []File{{"labels.json", 1}, {"rows.csv", 1}}, &Kitfile{
			ManifestVersion: ManifestVersion,
			DataSets:        []DataSet{{Path: "rows.csv"}, {Path: "labels.json"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Generate(tc.files)); d != "" {
				t.Errorf("Generate (-want +got):\n%s", d)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	gen := Generate([]File{{"w.gguf", 10}, {"config.json", 1}, {"README.md", 1}, {"x.py", 1}})
	user, err := Parse([]byte(`
package: {name: mine, authors: [me]}
model: {framework: llama.cpp, parts: [{path: config.json, type: config}]}
code: [{path: x.py, description: the script}]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Kitfile{
		ManifestVersion: ManifestVersion,
		Package:         Package{Name: "mine", Authors: []string{"me"}},
		Model:           &Model{Name: "w", Path: "w.gguf", Framework: "llama.cpp", Parts: []ModelPart{{Path: "config.json", Type: "config"}}},
		Code:            []Code{{Path: "x.py", Description: "the script"}},
		Docs:            []Docs{{Path: "README.md", Description: "Readme file"}},
	}
	if d := cmp.Diff(want, Merge(gen, user)); d != "" {
		t.Errorf("Merge (-want +got):\n%s", d)
	}

	// A user folder entry swallows the generated entries inside it.
	gen = Generate([]File{{"m/a.gguf", 10}, {"m/b.json", 1}, {"README.md", 1}})
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
		{"duplicate", "manifestVersion: 1.0.0\nmodel: {path: a.gguf}\ncode: [{path: ./a.gguf}]\n", "overlaps"},
		{"nested", "manifestVersion: 1.0.0\nmodel: {path: d/b.json}\ndatasets: [{path: d}]\n", "overlaps"},
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
