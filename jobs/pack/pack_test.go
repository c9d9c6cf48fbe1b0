package pack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

type entry struct {
	Name, Body string
	Mode       int64
	Dir        bool
	Uid, Gid   int
	ModTime    int64
}

func readTar(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out = append(out, entry{h.Name, string(body), h.Mode, h.Typeflag == tar.TypeDir, h.Uid, h.Gid, h.ModTime.Unix()})
	}
}

func TestLayout(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"model/weights.bin": "w",
		"model/sub/b.json":  "b",
		"model/sub/a.json":  "a",
		"model/.git/HEAD":   "ignored",
		"model/Kitfile":     "ignored",
		"other/file.txt":    "not in layer",
		"deep/er/file.gguf": "g",
	})
	cases := []struct {
		rel  string
		want []entry
	}{
		{"deep/er/file.gguf", []entry{
			{Name: "deep", Mode: 0o755, Dir: true},
			{Name: "deep/er", Mode: 0o755, Dir: true},
			{Name: "deep/er/file.gguf", Body: "g", Mode: 0o644},
		}},
		{"model", []entry{
			{Name: "model", Mode: 0o755, Dir: true},
			{Name: "model/sub", Mode: 0o755, Dir: true},
			{Name: "model/sub/a.json", Body: "a", Mode: 0o644},
			{Name: "model/sub/b.json", Body: "b", Mode: 0o644},
			{Name: "model/weights.bin", Body: "w", Mode: 0o644},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.rel, func(t *testing.T) {
			items, err := Walk(root, tc.rel)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := Write(&buf, items, false); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, readTar(t, buf.Bytes())); d != "" {
				t.Errorf("tar entries (-want +got):\n%s", d)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	for _, gz := range []bool{false, true} {
		a, b := t.TempDir(), t.TempDir()
		files := map[string]string{"m/x.bin": "xxxx", "m/y.json": "{}"}
		writeFiles(t, a, files)
		writeFiles(t, b, files)
		// Different times and modes must not change the bytes.
		old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		if err := os.Chtimes(filepath.Join(b, "m/x.bin"), old, old); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(b, "m/y.json"), 0o755); err != nil {
			t.Fatal(err)
		}
		var out [2]bytes.Buffer
		var diff [2]string
		for i, root := range []string{a, b} {
			items, err := Walk(root, "m")
			if err != nil {
				t.Fatal(err)
			}
			d, err := Write(&out[i], items, gz)
			if err != nil {
				t.Fatal(err)
			}
			diff[i] = d.String()
		}
		if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) || diff[0] != diff[1] {
			t.Fatalf("gzip=%t: same files gave different layers", gz)
		}
		if gz {
			zr, err := gzip.NewReader(&out[0])
			if err != nil {
				t.Fatal(err)
			}
			if !zr.ModTime.IsZero() || zr.Name != "" {
				t.Errorf("gzip header has mtime %v name %q", zr.ModTime, zr.Name)
			}
		}
	}
}

func TestRefusesSymlink(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"m/a.bin": "a"})
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "m", "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Walk(root, "m"); err == nil {
		t.Fatal("Walk accepted a symlink")
	}
}

// A folder swapped for a symlink after Walk (a volume another pod can
// write) cannot lead Write outside the root.
func TestWriteRefusesASwappedFolder(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "models", "w.bin"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "w.bin"), []byte("secret!"), 0o644); err != nil {
		t.Fatal(err)
	}
	items, err := Walk(root, "models")
	if err != nil {
		t.Fatal(err)
	}
	// The swap: models becomes a link to a folder outside the root.
	if err := os.RemoveAll(filepath.Join(root, "models")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "models")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Write(&out, items, false); err == nil {
		t.Fatal("Write read through a symlink out of its root")
	}
	if bytes.Contains(out.Bytes(), []byte("secret!")) {
		t.Fatal("the layer holds a file from outside the root")
	}
}
