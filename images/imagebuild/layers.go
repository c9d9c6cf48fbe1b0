package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or folder of a layer.
type entry struct {
	path     string // absolute, without the leading "/"
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// The nonroot user and group, as distroless writes them. Only root and
// nonroot exist: nothing in the images runs as anyone else.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnonroot:x:65532:\n"
)

// baseLayer holds what a static Go binary expects of its filesystem: CA
// certificates for TLS to registries and Hugging Face, /etc/passwd so the
// uid has a name and home, and a /tmp. It is the same bytes for every
// command and platform, so registries store it once.
func baseLayer(o *Options) (v1.Layer, error) {
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificates %s (install Debian's ca-certificates package or pass --ca-certs): %w", o.CACerts, err)
	}
	if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA certificates %s hold no PEM certificate", o.CACerts)
	}
	return layer(o.Created, []entry{
		{path: "etc", dir: true, mode: 0o755},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/ssl", dir: true, mode: 0o755},
		{path: "etc/ssl/certs", dir: true, mode: 0o755},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{path: "home", dir: true, mode: 0o755},
		{path: "home/nonroot", dir: true, mode: 0o700, uid: Nonroot, gid: Nonroot},
		{path: "tmp", dir: true, mode: 0o1777},
	})
}

// binaryLayer puts the program at /<name>, owned by root and not writable by
// the nonroot user that runs it.
func binaryLayer(o *Options, name, path string) (v1.Layer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return layer(o.Created, []entry{{path: name, mode: 0o755, data: b}})
}

// layer writes a tar with sorted entries, one fixed mtime and no user or
// group names, so its bytes depend on the content only; gzip from the
// standard library is deterministic for a given Go release.
func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime.UTC().Truncate(time.Second),
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.path+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}
