package pack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/test/fixtures"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type entry struct {
	Name, Body string
	Mode       int64
	Type       byte
	Uid, Gid   int
	Uname      string
	ModTime    int64
	Format     tar.Format
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
		out = append(out, entry{h.Name, string(body), h.Mode, h.Typeflag, h.Uid, h.Gid, h.Uname + h.Gname, h.ModTime.Unix(), h.Format})
	}
}

func layer(t *testing.T, root, rel string, others []string, c v1alpha1.Compression) ([]byte, digest.Digest) {
	t.Helper()
	items, err := Walk(root, rel, others)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	diff, err := Write(&buf, items, c)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), diff
}

// TestGolden packs the golden folder and compares every layer digest with
// the pinned ones, and every compressed layer's diffID with the plain
// layer's digest.
func TestGolden(t *testing.T) {
	root := t.TempDir()
	if err := fixtures.WriteGolden(root); err != nil {
		t.Fatal(err)
	}
	kf, err := kitfile.Parse([]byte(fixtures.GoldenKitfile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []v1alpha1.Compression{v1alpha1.CompressionNone, v1alpha1.CompressionGzip, v1alpha1.CompressionZstd} {
		var got []string
		for i, e := range kf.Entries() {
			b, diff := layer(t, root, e.Path, kf.Paths(), c)
			got = append(got, digest.FromBytes(b).String())
			if c != v1alpha1.CompressionNone && diff.String() != fixtures.GoldenDigests[v1alpha1.CompressionNone][i] {
				t.Errorf("%s %s: diffID %s is not the plain layer's digest", c, e.Path, diff)
			}
		}
		if d := cmp.Diff(fixtures.GoldenDigests[c], got); d != "" {
			t.Errorf("%s layer digests (-want +got):\n%s", c, d)
		}
	}
}

// TestHeaders pins each header detail kit writes: order, folder entries
// without a trailing slash, modes from disk, Uid 1000 Gid 0, no names,
// zero times, and the USTAR and PAX forms of long names.
func TestHeaders(t *testing.T) {
	root := t.TempDir()
	if err := fixtures.WriteGolden(root); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 60)
	name := strings.Repeat("n", 120) + ".csv"
	b, _ := layer(t, root, "data", nil, v1alpha1.CompressionNone)
	dir := func(n string) entry {
		return entry{Name: n, Mode: 0o755, Type: tar.TypeDir, Uid: 1000, Format: tar.FormatUSTAR}
	}
	file := func(n, body string, mode int64, f tar.Format) entry {
		return entry{Name: n, Body: body, Mode: mode, Type: tar.TypeReg, Uid: 1000, Format: f}
	}
	want := []entry{
		dir("data"),
		file("data/empty.txt", "", 0o644, tar.FormatUSTAR),
		dir("data/nested"),
		dir("data/nested/deeper"),
		file("data/"+name, "long", 0o644, tar.FormatPAX),
		dir("data/" + long),
		dir("data/" + long + "/" + long),
		file("data/"+long+"/"+long+"/rows.csv", "a,b\n", 0o644, tar.FormatUSTAR),
	}
	if d := cmp.Diff(want, readTar(t, b)); d != "" {
		t.Errorf("data layer (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		rel  string
		want []entry
	}{
		{"scripts", []entry{dir("scripts"), file("scripts/run.sh", "#!/bin/sh\necho hi\n", 0o755, tar.FormatUSTAR)}},
		{"model/config.json", []entry{dir("model"), file("model/config.json", `{"a":1}`, 0o600, tar.FormatUSTAR)}},
	} {
		b, _ := layer(t, root, tc.rel, nil, v1alpha1.CompressionNone)
		if d := cmp.Diff(tc.want, readTar(t, b)); d != "" {
			t.Errorf("%s layer (-want +got):\n%s", tc.rel, d)
		}
	}
}

// Another entry's path inside a layer is left out of it, element by
// element; the Kitfile is left out at the root only.
func TestExclusion(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"Kitfile":         "x",
		"a.gguf":          "w",
		"a.gguf2":         "not a.gguf",
		"data/t.csv":      "t",
		"data/x/Kitfile":  "kept",
		"train.py":        "code",
		".git/HEAD":       "never",
		"sub/.git/config": "never",
	})
	b, _ := layer(t, root, ".", []string{".", "a.gguf", "data/t.csv"}, v1alpha1.CompressionNone)
	var names []string
	for _, e := range readTar(t, b) {
		names = append(names, e.Name)
	}
	want := []string{"a.gguf2", "data", "data/x", "data/x/Kitfile", "sub", "train.py"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("catch-all layer (-want +got):\n%s", d)
	}
}

// Times and owners never change the bytes; modes do, as they are kept.
func TestDeterministic(t *testing.T) {
	for _, c := range []v1alpha1.Compression{v1alpha1.CompressionNone, v1alpha1.CompressionGzip, v1alpha1.CompressionZstd} {
		a, b := t.TempDir(), t.TempDir()
		files := map[string]string{"m/x.bin": strings.Repeat("xy", 100000), "m/y.json": "{}"}
		writeFiles(t, a, files)
		writeFiles(t, b, files)
		old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		if err := os.Chtimes(filepath.Join(b, "m/x.bin"), old, old); err != nil {
			t.Fatal(err)
		}
		la, da := layer(t, a, "m", nil, c)
		lb, db := layer(t, b, "m", nil, c)
		if !bytes.Equal(la, lb) || da != db {
			t.Fatalf("%s: same files gave different layers", c)
		}
		if err := os.Chmod(filepath.Join(b, "m/y.json"), 0o755); err != nil {
			t.Fatal(err)
		}
		if lc, _ := layer(t, b, "m", nil, c); bytes.Equal(la, lc) {
			t.Fatalf("%s: a changed mode did not change the layer", c)
		}
		// The stream decompresses to the tar the diffID names.
		plain, _ := layer(t, a, "m", nil, v1alpha1.CompressionNone)
		var r io.Reader = bytes.NewReader(la)
		switch c {
		case v1alpha1.CompressionGzip:
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			if !zr.ModTime.IsZero() || zr.Name != "" {
				t.Errorf("gzip header has mtime %v name %q", zr.ModTime, zr.Name)
			}
			r = zr
		case v1alpha1.CompressionZstd:
			zr, err := zstd.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			r = zr
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("%s: decompressed layer is not the plain tar", c)
		}
		if c != v1alpha1.CompressionNone && da != digest.FromBytes(plain) {
			t.Errorf("%s: diffID %s, plain tar %s", c, da, digest.FromBytes(plain))
		}
	}
}

// A link inside an entry's folder is skipped, never followed, as kit
// skips it; an entry that is itself a link is refused.
func TestLinks(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"m/a.bin": "a"})
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "m", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("m", filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	b, _ := layer(t, root, "m", nil, v1alpha1.CompressionNone)
	var names []string
	for _, e := range readTar(t, b) {
		names = append(names, e.Name)
	}
	if d := cmp.Diff([]string{"m", "m/a.bin"}, names); d != "" {
		t.Errorf("layer (-want +got):\n%s", d)
	}
	if _, err := Walk(root, "alias", nil); err == nil {
		t.Error("Walk accepted an entry that is a link")
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
	items, err := Walk(root, "models", nil)
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
	if _, err := Write(&out, items, v1alpha1.CompressionNone); err == nil {
		t.Fatal("Write read through a symlink out of its root")
	}
	if bytes.Contains(out.Bytes(), []byte("secret!")) {
		t.Fatal("the layer holds a file from outside the root")
	}
}
