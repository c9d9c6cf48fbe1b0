package push

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/packline/packline/jobs/pack"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

// A layer key moves with everything that moves the layer's bytes (media
// type, so compression; names, modes, sizes; each file's content id) and
// with nothing else (times, inodes, where the tree lies); a file without an
// id gives no key.
func TestLayerKey(t *testing.T) {
	items := func() []pack.Item {
		return []pack.Item{
			{Name: "m", Dir: true, Mode: 0o755},
			{Name: "m/w.safetensors", Size: 10, Mode: 0o644, Root: "/a", Ino: 1},
		}
	}
	ids := map[string]string{"m/w.safetensors": "sha256:aa"}
	id := func(m map[string]string) func(string) (string, bool) {
		return func(n string) (string, bool) { v, ok := m[n]; return v, ok }
	}
	base := layerKey("t", items(), id(ids))
	if base == "" {
		t.Fatal("no key")
	}
	cases := []struct {
		name   string
		media  string
		change func([]pack.Item)
		ids    map[string]string
		same   bool
	}{
		{name: "time, inode and root", change: func(it []pack.Item) { it[1].Ino, it[1].Root = 2, "/b" }, same: true},
		{name: "media type", media: "t+zstd"},
		{name: "mode", change: func(it []pack.Item) { it[1].Mode = 0o755 }},
		{name: "folder mode", change: func(it []pack.Item) { it[0].Mode = 0o700 }},
		{name: "size", change: func(it []pack.Item) { it[1].Size = 11 }},
		{name: "name", change: func(it []pack.Item) { it[1].Name = "m/x.safetensors" }, ids: map[string]string{"m/x.safetensors": "sha256:aa"}},
		{name: "content id", ids: map[string]string{"m/w.safetensors": "sha256:bb"}},
		{name: "setuid", change: func(it []pack.Item) { it[1].Mode |= fs.ModeSetuid }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it, m, media := items(), ids, "t"
			if tc.change != nil {
				tc.change(it)
			}
			if tc.ids != nil {
				m = tc.ids
			}
			if tc.media != "" {
				media = tc.media
			}
			got := layerKey(media, it, id(m))
			if (got == base) != tc.same {
				t.Errorf("key %s, base %s: want same=%t", got, base, tc.same)
			}
		})
	}
	if k := layerKey("t", items(), id(nil)); k != "" {
		t.Errorf("a file without an id gave key %s", k)
	}
	if k := layerKey("t", items(), nil); k != "" {
		t.Errorf("no ids gave key %s", k)
	}
}

// Earlier pushes are read only from the target's own registry, with its
// credentials: a reference elsewhere is not even asked for.
func TestLoadPreviousStaysOnTheRegistry(t *testing.T) {
	host, count := regtest.Proxy(t, regtest.Start(t))
	repo := repoAt(t, host, "prev/model", registry.Options{})
	p, err := LoadPrevious(t.Context(), repo, "", []string{
		"elsewhere.example:5000/prev/model@sha256:" + strings.Repeat("a", 64),
		"not a reference",
	})
	if err != nil || len(p.Found) != 0 || count.Requests() != 0 {
		t.Fatalf("found %v (%v) with %d requests, want nothing and no request", p.Found, err, count.Requests())
	}
	// A missing tag is no error: a first run.
	if p, err := LoadPrevious(t.Context(), repo, "v1", nil); err != nil || len(p.Found) != 0 {
		t.Fatalf("missing tag: %v %v", p.Found, err)
	}
}
