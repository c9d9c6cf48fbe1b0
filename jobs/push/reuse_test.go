package push

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/packline/packline/jobs/internal/pack"
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

// Keys from local file ids (a volume's stat fingerprints) never shape the
// pushed manifest: the same files with other local ids give the same
// digest. They are kept in the side manifest, where LoadPrevious finds
// them, so a re-push with the same ids writes no layer.
func TestLocalKeysStayBesideTheManifest(t *testing.T) {
	host := regtest.Start(t)
	root := t.TempDir()
	writeTree(t, root, modelFiles)
	sameTimes(t, root)
	ids := func(gen string) func(string) (string, bool) {
		return func(name string) (string, bool) { return "stat:" + gen + ":" + name, true }
	}
	repo := repoAt(t, host, "local/model", registry.Options{})
	first, _, err := pushTree(t, repo, root, Options{Tag: "v1", FileID: ids("1"), LocalFileIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	prev, err := LoadPrevious(t.Context(), repo, "v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(prev.layers) == 0 {
		t.Fatalf("no layer keys found beside %s", first)
	}
	again, st, err := pushTree(t, repo, root, Options{Tag: "v1", FileID: ids("1"), LocalFileIDs: true, Previous: prev})
	if err != nil || again != first || st.Skipped != st.Layers || st.Uploaded != 0 {
		t.Fatalf("re-push: %s (want %s), %+v, %v: want every layer skipped", again, first, st, err)
	}
	moved, _, err := pushTree(t, repo, root, Options{Tag: "v1", FileID: ids("2"), LocalFileIDs: true, Previous: prev})
	if err != nil || moved != first {
		t.Fatalf("other local ids: %s (want %s), %v", moved, first, err)
	}
	// Content ids stay in the manifest, as before (HTTP, Git, Hub).
	content, _, err := pushTree(t, repoAt(t, host, "local/content", registry.Options{}), root, Options{Tag: "v1", FileID: ids("1")})
	if err != nil || content == first {
		t.Fatalf("content ids: %s, %v: want a manifest with the keys, not %s", content, err, first)
	}
}
