package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

type tarEntry struct {
	name, body, link string
	typ              byte
}

func makeTar(t *testing.T, gz bool, entries ...tarEntry) []byte {
	var buf bytes.Buffer
	var zw *gzip.Writer
	tw := tar.NewWriter(&buf)
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	}
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Linkname: e.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func serve(t *testing.T, files map[string][]byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPArchives(t *testing.T) {
	good := makeTar(t, true, tarEntry{name: "m/", typ: tar.TypeDir}, tarEntry{name: "m/w.bin", body: "w"}, tarEntry{name: "README.md", body: "r"})
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	f, _ := zw.Create("z/a.txt")
	f.Write([]byte("a"))
	zw.Close()
	big := makeTar(t, false, tarEntry{name: "big.bin", body: string(bytes.Repeat([]byte("b"), 2000))})
	many := makeTar(t, false, tarEntry{name: "1", body: "1"}, tarEntry{name: "2", body: "2"}, tarEntry{name: "3", body: "3"}, tarEntry{name: "4", body: "4"})

	var zsym bytes.Buffer
	zw = zip.NewWriter(&zsym)
	h := &zip.FileHeader{Name: "link"}
	h.SetMode(0o777 | 1<<27) // os.ModeSymlink
	w, _ := zw.CreateHeader(h)
	w.Write([]byte("/etc/passwd"))
	zw.Close()

	srv := serve(t, map[string][]byte{
		"/good.tgz":      good,
		"/good.zip":      zbuf.Bytes(),
		"/plain.gguf":    []byte("gguf"),
		"/traversal.tar": makeTar(t, false, tarEntry{name: "../../evil", body: "x"}),
		"/absolute.tar":  makeTar(t, false, tarEntry{name: "/etc/evil", body: "x"}),
		"/symlink.tar":   makeTar(t, false, tarEntry{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}),
		"/hardlink.tar":  makeTar(t, false, tarEntry{name: "l", typ: tar.TypeLink, link: "../x"}),
		"/device.tar":    makeTar(t, false, tarEntry{name: "dev", typ: tar.TypeChar}),
		"/big.tar":       big,
		"/many.tar":      many,
		"/symlink.zip":   zsym.Bytes(),
		"/traversal.zip": zipWith(t, "../evil"),
	})
	lim := Limits{MaxBytes: 1000, MaxEntries: 3}
	cases := []struct {
		file       string
		want       map[string][]byte
		wantReason string
	}{
		{"good.tgz", map[string][]byte{"m/w.bin": []byte("w"), "README.md": []byte("r")}, ""},
		{"good.zip", map[string][]byte{"z/a.txt": []byte("a")}, ""},
		{"plain.gguf", map[string][]byte{"plain.gguf": []byte("gguf")}, ""},
		{"traversal.tar", nil, workerv1.ReasonUnsafeArchive},
		{"absolute.tar", nil, workerv1.ReasonUnsafeArchive},
		{"symlink.tar", nil, workerv1.ReasonUnsafeArchive},
		{"hardlink.tar", nil, workerv1.ReasonUnsafeArchive},
		{"device.tar", nil, workerv1.ReasonUnsafeArchive},
		{"big.tar", nil, workerv1.ReasonUnsafeArchive},
		{"many.tar", nil, workerv1.ReasonUnsafeArchive},
		{"symlink.zip", nil, workerv1.ReasonUnsafeArchive},
		{"traversal.zip", nil, workerv1.ReasonUnsafeArchive},
		{"missing.tar", nil, workerv1.ReasonSourceNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			env := Env{Workspace: t.TempDir(), HTTP: srv.Client(), Archive: lim}
			got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/" + tc.file}}, env)
			if tc.wantReason != "" {
				assertReason(t, err, tc.wantReason, true)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, readDir(t, got.Root)); d != "" {
				t.Errorf("extracted (-want +got):\n%s", d)
			}
		})
	}
}

func zipWith(t *testing.T, name string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	f, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	zw.Close()
	return b.Bytes()
}

func TestHTTPChecksum(t *testing.T) {
	body := []byte("model bytes")
	srv := serve(t, map[string][]byte{"/m.bin": body})
	sum := sha256.Sum256(body)
	hexSum := hex.EncodeToString(sum[:])

	env := Env{Workspace: t.TempDir(), HTTP: srv.Client()}
	got, err := Fetch(t.Context(), v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/m.bin", SHA256: hexSum}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != "sha256:"+hexSum {
		t.Errorf("revision %q", got.Revision)
	}
	wrong := "0000000000000000000000000000000000000000000000000000000000000000"
	_, err = Fetch(t.Context(), v1alpha1.ArtifactSource{HTTP: &v1alpha1.HTTPSource{URL: srv.URL + "/m.bin", SHA256: wrong}}, env)
	assertReason(t, err, workerv1.ReasonChecksum, true)
}
