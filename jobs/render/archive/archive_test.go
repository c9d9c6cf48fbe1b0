package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteIsReproducibleAndSorted(t *testing.T) {
	a, err := Write([]File{{Name: "b.yaml", Data: []byte("b")}, {Name: "a.yaml", Data: []byte("a")}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Write([]File{{Name: "a.yaml", Data: []byte("a")}, {Name: "b.yaml", Data: []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("input order changed the bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() || zr.OS != 255 {
		t.Errorf("gzip header name=%q mtime=%v os=%d", zr.Name, zr.ModTime, zr.OS)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.ModTime.Unix() != 0 || h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 || h.Typeflag != tar.TypeReg {
			t.Errorf("%s: header not fixed: %+v", h.Name, h)
		}
	}
	if diff := cmp.Diff([]string{"a.yaml", "b.yaml"}, names); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestWriteRefusesUnsafeNames(t *testing.T) {
	for _, name := range []string{"", "/etc/passwd", "../x.yaml", "a/../../x", "./a.yaml"} {
		if _, err := Write([]File{{Name: name, Data: []byte("x")}}); err == nil {
			t.Errorf("Write accepted %q", name)
		}
	}
	if _, err := Write([]File{{Name: "a", Data: nil}, {Name: "a", Data: nil}}); err == nil {
		t.Error("Write accepted a duplicate entry")
	}
}
