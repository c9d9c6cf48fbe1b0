package push

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/registry"
)

// A lazy source's downloads are hashed as they arrive: the layers of one
// big file are then pushed without hashing, and the artifact is the one a
// push from the files on disk gives. A download that was not teed (resumed)
// or whose tee saw other bytes than the file got falls back to hashing
// while sending, with the same result.
func TestPrehashedPush(t *testing.T) {
	big := map[string][]byte{
		"model.safetensors":     bytes.Repeat([]byte("weights!"), 3<<17), // 3 MiB
		"nested/deep/part.gguf": bytes.Repeat([]byte("gguf"), 1<<19),     // 2 MiB, under folders
	}
	smallFiles := map[string]string{"config.json": `{"hidden":1}`, "README.md": "# model\n"}

	for _, f := range []v1alpha1.PackFormat{v1alpha1.FormatModelKit, v1alpha1.FormatModelPack} {
		// The reference: every file on disk, hashed while sent.
		ref := t.TempDir()
		writeTree(t, ref, smallFiles)
		for name, b := range big {
			writeTree(t, ref, map[string]string{name: string(b)})
		}
		sameTimes(t, ref)
		want, _, err := pushTree(t, repoAt(t, inProcess(t), "prehash/ref", registry.Options{}), ref, Options{Format: f})
		if err != nil {
			t.Fatal(err)
		}

		for _, tc := range []struct {
			name      string
			tee       func(name string, b []byte) []byte // what the tee is given; nil: nothing
			prehashed int
		}{
			{"teed", func(_ string, b []byte) []byte { return b }, len(big)},
			{"resumed, not teed", nil, 0},
			{"tee saw other bytes", func(_ string, b []byte) []byte { return bytes.Repeat([]byte{'x'}, len(b)) }, 0},
		} {
			t.Run(string(f)+"/"+tc.name, func(t *testing.T) {
				root := t.TempDir()
				writeTree(t, root, smallFiles)
				for name, b := range big {
					// A placeholder of the file's size, as the Hub source lays out.
					writeTree(t, root, map[string]string{name: ""})
					if err := os.Truncate(filepath.Join(root, filepath.FromSlash(name)), int64(len(b))); err != nil {
						t.Fatal(err)
					}
				}
				sameTimes(t, root)
				var asked []string
				complete := func(_ context.Context, names []string, tee func(string) io.Writer) error {
					asked = names
					for _, name := range names {
						b, ok := big[name]
						if !ok {
							continue
						}
						if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), b, 0o644); err != nil {
							return err
						}
						if w := tee(name); w != nil && tc.tee != nil {
							w.Write(tc.tee(name, b))
						}
					}
					return nil
				}
				// A registry of its own: it holds none of the layers.
				got, st, err := pushTree(t, repoAt(t, inProcess(t), "prehash/lazy", registry.Options{}), root,
					Options{Format: f, Complete: complete})
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("digest %s, want the push from disk's %s", got, want)
				}
				if st.Prehashed != tc.prehashed {
					t.Errorf("%d layers prehashed, want %d (stats %+v)", st.Prehashed, tc.prehashed, st)
				}
				for name := range big {
					if !strings.Contains(strings.Join(asked, " "), name) {
						t.Errorf("Complete was not asked for %s (asked %v)", name, asked)
					}
				}
			})
		}
	}
}
