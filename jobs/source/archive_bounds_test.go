package source

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// TestArchiveHugeDeclaredSize: a tar entry whose header declares nearly
// MaxInt64 bytes, after a first small file, must not wrap the byte count
// around and pass the limit; it is refused before anything is written
// past the limit, even when the stream behind it (here 2 MiB of zeros, in
// practice a gzip bomb) is far larger than the limit.
func TestArchiveHugeDeclaredSize(t *testing.T) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{Name: "small", Typeflag: tar.TypeReg, Size: 10, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	tw.Write(make([]byte, 10))
	if err := tw.WriteHeader(&tar.Header{Name: "huge", Typeflag: tar.TypeReg, Size: math.MaxInt64 - 5, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	tw.Write(make([]byte, 2<<20)) // the stream ends here: no Close
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()

	dir := t.TempDir()
	const limit = 1 << 20
	err := extractTar(bytes.NewReader(gz.Bytes()), true, dir, Limits{MaxBytes: limit})
	assertReason(t, err, workerv1.ReasonUnsafeArchive, true)
	if n := treeBytes(t, dir); n > limit {
		t.Errorf("extraction wrote %d bytes, over the %d-byte limit", n, limit)
	}
}

// TestZipEntriesCountedBeforeTheDirectoryIsRead: a zip with 70,000 entries
// (zip64) is refused by its entry count without archive/zip loading its
// central directory: the refusal allocates a few objects, not one per
// entry.
func TestZipEntriesCountedBeforeTheDirectoryIsRead(t *testing.T) {
	const entries = 70_000
	path := filepath.Join(t.TempDir(), "many.zip")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for i := range entries {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("f%05d", i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, lim := range []Limits{{MaxEntries: 1000}, {MaxEntries: 69_999}} {
		var err error
		allocs := testing.AllocsPerRun(1, func() { err = extractZip(path, t.TempDir(), lim) })
		assertReason(t, err, workerv1.ReasonUnsafeArchive, true)
		if allocs > 1000 {
			t.Errorf("limit %d: refusing took %.0f allocations; the central directory was read into memory", lim.MaxEntries, allocs)
		}
	}
	// The count is exact: 70,000 entries pass a 70,000 limit.
	if err := checkZipDirectory(path, Limits{MaxEntries: entries}.withDefaults()); err != nil {
		t.Errorf("70,000 entries within a 70,000 limit: %v", err)
	}
}

func treeBytes(t *testing.T, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
