package pack

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/api/v1alpha1"
)

// A prehashed layer's digest is that of Write's bytes for the same items,
// whatever the pieces the file arrives in; anything but exactly the file's
// bytes gives no digest, never a wrong one.
func TestPrehash(t *testing.T) {
	root := t.TempDir()
	content := bytes.Repeat([]byte("weights!"), 100_001) // not a multiple of 512
	long := strings.Repeat("d", 120)
	for name, b := range map[string][]byte{
		"model.safetensors":       content,
		"onnx/deep/model.onnx":    content[:513],
		long + "/model.gguf":      content[:1],
		"folder/only.bin":         content[:4096],
		"two/a.bin":               content[:10],
		"two/b.bin":               content[:20],
		"empty-file/nothing.json": nil,
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "folder", "zz-empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	packed := func(items []Item) digest.Digest {
		var buf bytes.Buffer
		if _, err := Write(&buf, items, v1alpha1.CompressionNone); err != nil {
			t.Fatal(err)
		}
		return digest.FromBytes(buf.Bytes())
	}
	for _, tc := range []struct {
		rel    string
		pieces []int // sizes the file is written in; the rest in one piece
		feed   func(b []byte) []byte
		want   bool
	}{
		{rel: "model.safetensors", pieces: []int{1, 511, 4096, 1 << 20}, want: true},
		{rel: "onnx/deep/model.onnx", want: true},    // parent folders first
		{rel: long + "/model.gguf", want: true},      // a PAX name
		{rel: "folder", want: true},                  // a folder with one file, and an empty folder after it
		{rel: "empty-file/nothing.json", want: true}, // zero bytes
		{rel: "two", want: false},                    // two files: not prehashable
		{rel: "model.safetensors", feed: func(b []byte) []byte { return b[:len(b)-1] }, want: false},
		{rel: "model.safetensors", feed: func(b []byte) []byte { return append(b[:len(b):len(b)], 'x') }, want: false},
	} {
		items, err := Walk(root, tc.rel, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := NewPrehash(items)
		if !ok {
			if tc.want {
				t.Errorf("%s: not prehashable", tc.rel)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p.Name())))
		if err != nil {
			t.Fatal(err)
		}
		if tc.feed != nil {
			b = tc.feed(b)
		}
		rest := b
		for _, n := range tc.pieces {
			n = min(n, len(rest))
			p.Write(rest[:n])
			rest = rest[n:]
		}
		p.Write(rest)
		d, size, ok := p.Sum()
		if ok != tc.want {
			t.Errorf("%s: Sum ok %v, want %v", tc.rel, ok, tc.want)
			continue
		}
		if !ok {
			continue
		}
		if want := packed(items); d != want {
			t.Errorf("%s: prehash %s, Write's bytes %s", tc.rel, d, want)
		}
		var buf bytes.Buffer
		Write(&buf, items, v1alpha1.CompressionNone)
		if size != int64(buf.Len()) {
			t.Errorf("%s: prehash size %d, Write wrote %d", tc.rel, size, buf.Len())
		}
		if d2, size2, ok2 := p.Sum(); d2 != d || size2 != size || !ok2 {
			t.Errorf("%s: a second Sum gave %s %d %v", tc.rel, d2, size2, ok2)
		}
		if !p.Matches(items) {
			t.Errorf("%s: does not match its own items", tc.rel)
		}
		for what, change := range map[string]func(*Item){
			"mode": func(it *Item) { it.Mode = 0o600 },
			"size": func(it *Item) { it.Size++ },
			"name": func(it *Item) { it.Name += "x" },
		} {
			other := append([]Item(nil), items...)
			for i := range other {
				if !other[i].Dir {
					change(&other[i]) // the file's: a folder's size is in no header
				}
			}
			if p.Matches(other) {
				t.Errorf("%s: matches items with another %s", tc.rel, what)
			}
		}
		if p.Matches(items[1:]) && len(items) > 1 {
			t.Errorf("%s: matches fewer items", tc.rel)
		}
	}
}
