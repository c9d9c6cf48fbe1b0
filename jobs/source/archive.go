package source

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// Limits cap what an archive may expand to, against archive bombs.
type Limits struct {
	MaxBytes   int64 // total bytes of regular files
	MaxEntries int
}

// DefaultLimits fit a large model (256 GiB) and refuse absurd archives.
var DefaultLimits = Limits{MaxBytes: 256 << 30, MaxEntries: 100_000}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultLimits.MaxEntries
	}
	return l
}

// archiveKind returns "tar", "tgz", "zip" or "" from a file name.
func archiveKind(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return "tgz"
	case strings.HasSuffix(n, ".tar"):
		return "tar"
	case strings.HasSuffix(n, ".zip"):
		return "zip"
	}
	return ""
}

func unsafeArchive(format string, a ...any) error {
	return failure.Permanent(workerv1.ReasonUnsafeArchive, fmt.Errorf(format, a...))
}

// extractor writes entries under dir and enforces the rules shared by tar
// and zip: regular files and folders only, relative names that stay inside
// dir, and the limits.
//
// Every file and folder is created through an os.Root opened on dir, so
// even a link that were somehow in dir could not lead a write out of it.
type extractor struct {
	dir     string
	root    *os.Root
	lim     Limits
	bytes   int64
	entries int
	// folders holds the folder entries' modes and times, applied once
	// every file is in (writing into a folder changes its time, and a
	// read-only folder could not be written into).
	folders map[string]entryAttrs
}

// entryAttrs are what an archive says about an entry beyond its bytes.
type entryAttrs struct {
	mode fs.FileMode
	time time.Time
}

func newExtractor(dir string, lim Limits) (*extractor, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &extractor{dir: dir, root: root, lim: lim.withDefaults(), folders: map[string]entryAttrs{}}, nil
}

func (x *extractor) close() { x.root.Close() }

func (x *extractor) target(name string) (string, error) {
	if x.entries++; x.entries > x.lim.MaxEntries {
		return "", unsafeArchive("archive has more than %d entries", x.lim.MaxEntries)
	}
	n := strings.ReplaceAll(name, `\`, "/")
	if n == "" || path.IsAbs(n) || filepath.IsAbs(name) || strings.Contains(n, ":") && len(n) > 1 && n[1] == ':' {
		return "", unsafeArchive("archive entry %q has an absolute path", name)
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", unsafeArchive("archive entry %q leaves the extraction folder", name)
	}
	return filepath.FromSlash(c), nil // relative to x.root
}

func (x *extractor) file(name string, size int64, attrs entryAttrs, r io.Reader) error {
	p, err := x.target(name)
	if err != nil {
		return err
	}
	// Compared without adding: a declared size near MaxInt64 must not wrap
	// x.bytes+size around to a small number and pass.
	if size < 0 || size > x.lim.MaxBytes-x.bytes {
		return unsafeArchive("archive expands to more than %d bytes", x.lim.MaxBytes)
	}
	if err := x.mkdir(filepath.Dir(p)); err != nil {
		return err
	}
	f, err := x.root.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return unsafeArchive("archive entry %q appears twice", name)
		}
		return err
	}
	// Copy at most the declared size (which fits the limit), then look for
	// one byte more to catch a header that lies.
	n, err := io.Copy(f, io.LimitReader(r, size))
	if err == nil && n == size {
		var one [1]byte
		if m, _ := io.ReadFull(r, one[:]); m > 0 {
			n++
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return unsafeArchive("archive entry %q ends before the %d bytes its header says", name, size)
	}
	if err != nil {
		return failure.Permanent(workerv1.ReasonSourceFailed, fmt.Errorf("extracting %q: %w", name, err))
	}
	if n != size {
		return unsafeArchive("archive entry %q is not the %d bytes its header says", name, size)
	}
	x.bytes += n
	return x.setAttrs(p, archiveMode(attrs.mode, false), attrs.time)
}

func (x *extractor) folder(name string, attrs entryAttrs) error {
	p, err := x.target(name)
	if err != nil {
		return err
	}
	if p != "." {
		x.folders[p] = attrs
	}
	return x.mkdir(p)
}

// finish gives every folder its entry's mode and time, and folders the
// archive only implies 0755 and the epoch, so that nothing depends on
// this pod's umask or clock.
func (x *extractor) finish() error {
	var dirs []string
	err := fs.WalkDir(x.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != "." {
			dirs = append(dirs, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	// Deepest first: a folder's time must be set after its children's.
	for i := len(dirs) - 1; i >= 0; i-- {
		a, ok := x.folders[filepath.FromSlash(dirs[i])]
		if !ok {
			a = entryAttrs{mode: 0o755}
		}
		if err := x.setAttrs(filepath.FromSlash(dirs[i]), archiveMode(a.mode, true), a.time); err != nil {
			return err
		}
	}
	return nil
}

func (x *extractor) setAttrs(p string, mode fs.FileMode, t time.Time) error {
	if t.IsZero() {
		t = epoch
	}
	if err := x.root.Chmod(p, mode); err != nil {
		return failure.Permanent(workerv1.ReasonSourceFailed, fmt.Errorf("extracting %s: %w", filepath.ToSlash(p), err))
	}
	if err := x.root.Chtimes(p, t, t); err != nil {
		return failure.Permanent(workerv1.ReasonSourceFailed, fmt.Errorf("extracting %s: %w", filepath.ToSlash(p), err))
	}
	return nil
}

// mkdir creates p (relative to the root) and its parents inside the root.
func (x *extractor) mkdir(p string) error {
	if p == "." {
		return nil
	}
	if err := x.root.MkdirAll(p, 0o755); err != nil {
		return unsafeArchive("creating %s: %v", filepath.ToSlash(p), err)
	}
	return nil
}

func extractTar(r io.Reader, gz bool, dir string, lim Limits) error {
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return unsafeArchive("not a gzip stream: %v", err)
		}
		defer zr.Close()
		r = zr
	}
	x, err := newExtractor(dir, lim)
	if err != nil {
		return err
	}
	defer x.close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return x.finish()
		}
		if err != nil {
			return unsafeArchive("reading tar: %v", err)
		}
		attrs := entryAttrs{mode: h.FileInfo().Mode(), time: h.ModTime}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
			err = x.file(h.Name, h.Size, attrs, tr)
		case tar.TypeDir:
			err = x.folder(h.Name, attrs)
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeSymlink, tar.TypeLink:
			err = unsafeArchive("archive entry %q is a link", h.Name)
		default:
			err = unsafeArchive("archive entry %q has type %q (device, fifo or unknown)", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func extractZip(path, dir string, lim Limits) error {
	// archive/zip reads the whole central directory into memory before it
	// returns; count its records first.
	if err := checkZipDirectory(path, lim.withDefaults()); err != nil {
		return err
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		return unsafeArchive("not a zip archive: %v", err)
	}
	defer zr.Close()
	x, err := newExtractor(dir, lim)
	if err != nil {
		return err
	}
	defer x.close()
	for _, f := range zr.File {
		mode := f.Mode()
		attrs := entryAttrs{mode: mode, time: f.Modified}
		switch {
		case mode.IsDir():
			err = x.folder(f.Name, attrs)
		case mode.IsRegular():
			var rc io.ReadCloser
			if rc, err = f.Open(); err != nil {
				return unsafeArchive("zip entry %q: %v", f.Name, err)
			}
			if f.UncompressedSize64 > uint64(x.lim.MaxBytes) {
				err = unsafeArchive("archive expands to more than %d bytes", x.lim.MaxBytes)
			} else {
				err = x.file(f.Name, int64(f.UncompressedSize64), attrs, rc)
			}
			rc.Close()
		default:
			err = unsafeArchive("archive entry %q is not a regular file or folder (%s)", f.Name, mode.Type())
		}
		if err != nil {
			return err
		}
	}
	return x.finish()
}

// ExtractTar unpacks a tar stream (gzip-compressed when gz) into dir with
// the rules above: regular files and folders only, with their modes,
// every path contained in dir, within lim. `kubectl packline pull`
// unpacks pushed layers with it, so a laptop gets the worker's safety.
func ExtractTar(r io.Reader, gz bool, dir string, lim Limits) error {
	return extractTar(r, gz, dir, lim)
}
