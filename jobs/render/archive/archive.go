// Package archive writes a reproducible tar+gzip: the same files always
// give the same bytes, so the same render always gives the same digest and
// a re-run never makes a GitOps tool roll out.
//
// Entries are sorted regular files with zero times, owners and fixed mode;
// the gzip header carries no name, time or OS. The remaining dependency is
// compress/flate's output for a given level, which is stable within a Go
// release (a toolchain upgrade could in principle change it).
package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// File is one archive entry.
type File struct {
	// Name is a relative slash path.
	Name string
	Data []byte
}

// Write returns the tar+gzip of files, sorted by name.
func Write(files []File) ([]byte, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	// Header fields stay zero: no name, no mtime. OS is set explicitly
	// because the zero value means FAT, and 255 is "unknown".
	zw.OS = 255
	tw := tar.NewWriter(zw)
	for i, f := range files {
		if err := checkName(f.Name); err != nil {
			return nil, err
		}
		if i > 0 && files[i-1].Name == f.Name {
			return nil, fmt.Errorf("duplicate archive entry %q", f.Name)
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Name,
			Size:     int64(len(f.Data)),
			Mode:     0o644,
			ModTime:  time.Unix(0, 0),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkName refuses names a consumer could extract outside its directory.
func checkName(name string) error {
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("unsafe archive entry name %q", name)
	}
	return nil
}
