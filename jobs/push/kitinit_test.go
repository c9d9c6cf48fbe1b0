package push

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/kitfile"
)

// TestLikeKitInitAndPack: a folder shaped like a Hugging Face repository
// (weights, config and tokenizer files, a dotfile, a loose script) gets the
// Kitfile `kit init --name hfl` wrote for it, and the layers and config
// `kit pack` wrote then, catch-all "." code layer included. The digests
// were printed by kit built from the KitOps source (commit a041892).
func TestLikeKitInitAndPack(t *testing.T) {
	root := t.TempDir()
	for _, f := range []struct {
		name, body string
		mode       os.FileMode
	}{
		{"model.safetensors", strings.Repeat("w", 3000), 0o644},
		{"onnx/model.onnx", strings.Repeat("o", 500), 0o644},
		{"config.json", "{}", 0o644},
		{"tokenizer.json", `{"t":1}`, 0o644},
		{".gitattributes", "x", 0o644},
		{"README.md", "# r", 0o644},
		{"data/t.csv", "a,b", 0o644},
		{"train.py", "print(1)", 0o755},
	} {
		p := filepath.Join(root, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{root, filepath.Join(root, "onnx"), filepath.Join(root, "data")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := kitfile.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	kf := kitfile.Generate(dir)
	kf.Package.Name = "hfl"
	want := &kitfile.Kitfile{
		ManifestVersion: "1.0.0",
		Package:         kitfile.Package{Name: "hfl"},
		Model: &kitfile.Model{Name: "model", Path: "model.safetensors", Parts: []kitfile.ModelPart{
			{Path: "onnx/model.onnx"}, {Path: "config.json"}, {Path: "tokenizer.json"},
		}},
		Code:     []kitfile.Code{{Path: "."}},
		DataSets: []kitfile.DataSet{{Path: "data"}},
		Docs:     []kitfile.Docs{{Path: "README.md", Description: "Readme file"}},
	}
	if d := cmp.Diff(want, kf); d != "" {
		t.Fatalf("generated Kitfile (-kit init +ours):\n%s", d)
	}
	var got []string
	for _, e := range kf.Entries() {
		items, err := pack.Walk(root, e.Path, kf.Paths())
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := pack.Write(&b, items, v1alpha1.CompressionNone); err != nil {
			t.Fatal(err)
		}
		d := digest.FromBytes(b.Bytes()).String()
		*e.Info = &kitfile.LayerInfo{Digest: d, DiffID: d}
		got = append(got, d)
	}
	kitDigests := []string{
		"sha256:37b874f18e8acfb887cbd6f0e9a378f46538513b25114e88c2e31a726073f1e5",
		"sha256:fe04e1d7077d28364b11c8d13c0d34e4b4ca0a7f21f49259155776bcc1b1d438",
		"sha256:549ec6ceb75b46169ad153f459dbfc18deb72df4819127742c3111623e1b7a20",
		"sha256:e22256fd54fb18325ade2b294264131cb415d5ca51a3967943b695e9949a8b1f",
		"sha256:764e786747cc30456bf848f5e98d9ca160975e6be29cdf990168f5ff40c6b67a",
		"sha256:f1c0830476ca70cd10e2698a0c24d1eed5d141502b32c7a45b56ba615cb2f41b",
		"sha256:d3c7da0e70c670e0373a169219f6e356610ec98493fa5d1740a4fa0a649317c8",
	}
	if d := cmp.Diff(kitDigests, got); d != "" {
		t.Errorf("layer digests (-kit pack +ours):\n%s", d)
	}
	cb, err := json.Marshal(kf)
	if err != nil {
		t.Fatal(err)
	}
	if d := digest.FromBytes(cb).String(); d != "sha256:e94cdc664a00241674cc6716a845813474d445b5a33537c9a3b22395867d2978" {
		t.Errorf("config digest %s differs from kit's:\n%s", d, cb)
	}
}
