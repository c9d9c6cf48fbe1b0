// Package pack writes a Kitfile entry (a file or a folder under the artifact
// root) as a tar layer whose bytes are those `kit pack` writes for the same
// folder and Kitfile. The rules, read from KitOps pkg/lib/kitfile/layer.go
// (writeLayerToTar, writeHeaderToTar, sanitizeTarHeader) and
// pkg/lib/filesystem/ignore.go, and each pinned by a test here:
//
//   - kit walks the whole context folder in lexical order (filepath.Walk)
//     and keeps what lies on the entry's branch: first the entry's parent
//     folders, then the entry and everything under it. The root itself has
//     no entry. Folders are entries of their own, empty ones included, named
//     without a trailing slash.
//   - Only regular files and folders are written. Inside an entry's folder,
//     symbolic links and special files are skipped, as kit skips them: a
//     link is never followed, so it can lead nowhere. An entry whose own
//     path is a link is refused (kitfile.Validate, and Walk here).
//   - Each header is the file's own (tar.FileInfoHeader: mode, size, type),
//     then sanitised: times zeroed, Uid 1000, Gid 0, no user or group name,
//     forward slashes. So the mode on disk is kept: 0755 stays executable,
//     0600 stays private.
//   - Long names are left to archive/tar's Writer, as kit does: USTAR with a
//     prefix when the path splits into ≤155+≤100 bytes, PAX records otherwise.
//   - Another entry's path inside this one is left out of this layer (the
//     other layer carries it), and so are the Kitfile and .kitignore at the
//     root. kit compares those paths as plain string prefixes; we compare
//     whole path elements, so that "model.gguf" never hides "model.gguf2".
//     We also never pack ".git" or our own state folder (kitfile.Ignored).
//   - gzip is compress/gzip at its default level with an empty header, as
//     `kit pack --compression gzip`. zstd (klauspost/compress, default level)
//     is our addition; kit at the commit read writes none and gzip only.
package pack

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/kitfile"
)

// Uid and Gid are what kit writes in every header.
const (
	Uid = 1000
	Gid = 0
)

// Item is one tar entry of a layer.
type Item struct {
	Name    string // slash-separated, relative to the root
	Abs     string // where it is; part of the push cache's key
	Root    string // the root Name is read under, through an os.Root
	Dir     bool
	Size    int64
	Mode    fs.FileMode // permission and setuid/setgid/sticky bits
	ModTime time.Time   // not written to the tar; cache key and ModelPack metadata
	Ino     uint64      // cache key
}

// Walk lists the entries of the layer for rel under root, in tar order.
// others are the paths of the artifact's other layers: those inside rel are
// left out, as kit leaves them out.
func Walk(root, rel string, others []string) ([]Item, error) {
	rel = path.Clean(filepath.ToSlash(rel))
	var items []Item
	// Parent folders first, as kit's walk from the root meets them.
	if rel != "." {
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			it, err := stat(root, strings.Join(parts[:i], "/"))
			if err != nil {
				return nil, err
			}
			if !it.Dir {
				return nil, fmt.Errorf("pack: %s is not a folder", it.Name)
			}
			items = append(items, it)
		}
	}
	excluded := inside(rel, others)
	start := filepath.Join(root, filepath.FromSlash(rel))
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name, _ := filepath.Rel(root, p)
		name = filepath.ToSlash(name)
		if name == "." {
			return nil // the root itself has no entry
		}
		if p != start && (skipped(name, d.Name()) || excluded(name)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if p != start && !d.IsDir() && !d.Type().IsRegular() {
			return nil // a link or special file: skipped, never followed
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		it, err := item(root, name, fi)
		if err != nil {
			return err
		}
		items = append(items, it)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// skipped reports names never packed: the Kitfile and .kitignore at the
// root (kit's ignore patterns, which match at the root only), and VCS and
// state folders anywhere.
func skipped(name, base string) bool {
	if kitfile.Ignored(base) {
		return true
	}
	return !strings.Contains(name, "/") && kitfile.IgnoredAtRoot(base)
}

// inside returns a test for paths that are, or lie under, one of the other
// layers' paths strictly inside rel.
func inside(rel string, others []string) func(string) bool {
	var in []string
	for _, o := range others {
		o = path.Clean(filepath.ToSlash(o))
		if o != rel && (rel == "." || strings.HasPrefix(o, rel+"/")) && o != "." {
			in = append(in, o)
		}
	}
	return func(p string) bool {
		for _, o := range in {
			if p == o || strings.HasPrefix(p, o+"/") {
				return true
			}
		}
		return false
	}
}

func stat(root, name string) (Item, error) {
	fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return Item{}, err
	}
	return item(root, name, fi)
}

func item(root, name string, fi fs.FileInfo) (Item, error) {
	it := Item{
		Name: name, Abs: filepath.Join(root, filepath.FromSlash(name)), Root: root,
		Mode:    fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky),
		ModTime: fi.ModTime(), Ino: inode(fi),
	}
	switch {
	case fi.IsDir():
		it.Dir = true
	case fi.Mode().IsRegular():
		it.Size = fi.Size()
	default:
		return Item{}, fmt.Errorf("pack: %s is not a regular file or folder", name)
	}
	return it, nil
}

// Header is the tar header kit writes for it: tar.FileInfoHeader's mode,
// type and size, then sanitizeTarHeader's constants.
func Header(it Item) *tar.Header {
	h := &tar.Header{Name: it.Name, Mode: int64(it.Mode.Perm()), Uid: Uid, Gid: Gid}
	if it.Mode&fs.ModeSetuid != 0 {
		h.Mode |= 0o4000
	}
	if it.Mode&fs.ModeSetgid != 0 {
		h.Mode |= 0o2000
	}
	if it.Mode&fs.ModeSticky != 0 {
		h.Mode |= 0o1000
	}
	if it.Dir {
		h.Typeflag = tar.TypeDir
	} else {
		h.Typeflag, h.Size = tar.TypeReg, it.Size
	}
	return h
}

// Write streams the tar of items to w, compressed with c. It returns the
// diffID (the digest of the uncompressed tar) when compressing; without
// compression the caller's digest of w's bytes is the diffID, and "" is
// returned so that the bytes are not hashed twice.
func Write(w io.Writer, items []Item, c v1alpha1.Compression) (digest.Digest, error) {
	zw, err := compressor(w, c)
	if err != nil {
		return "", err
	}
	diff := sha256.New()
	tw := tar.NewWriter(w)
	if zw != nil {
		tw = tar.NewWriter(io.MultiWriter(zw, diff))
	}
	buf := make([]byte, 1<<20)
	roots := rootCache{}
	defer roots.close()
	for _, it := range items {
		if err := tw.WriteHeader(Header(it)); err != nil {
			return "", err
		}
		if it.Dir {
			continue
		}
		if err := copyFile(tw, it, roots, buf); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if zw == nil {
		return "", nil
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return digest.NewDigest(digest.SHA256, diff), nil
}

// compressor returns the compressing writer for c, or nil for none.
func compressor(w io.Writer, c v1alpha1.Compression) (io.WriteCloser, error) {
	switch c {
	case "", v1alpha1.CompressionNone:
		return nil, nil
	case v1alpha1.CompressionGzip:
		// Default level and an empty header (no name, zero mtime), as kit.
		return gzip.NewWriter(w), nil
	case v1alpha1.CompressionZstd:
		// Default level; its output depends only on the input and the
		// library version (pinned in go.mod), not on scheduling.
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault))
	}
	return nil, fmt.Errorf("pack: compression %q is not none, gzip or zstd", c)
}

// copyFile copies exactly it.Size bytes: a file that changed size since Walk
// would otherwise corrupt the tar or silently differ from its header. It
// opens the file through an os.Root of its root, so a folder swapped for a
// symlink after the Kitfile was validated (a volume another pod can write)
// cannot lead the read outside the root.
func copyFile(w io.Writer, it Item, roots rootCache, buf []byte) error {
	f, err := roots.open(it)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("pack: %s is no longer a regular file", it.Name)
	}
	n, err := io.CopyBuffer(w, io.LimitReader(onlyReader{f}, it.Size), buf)
	if err != nil {
		return fmt.Errorf("pack: reading %s: %w", it.Name, err)
	}
	if n != it.Size {
		return fmt.Errorf("pack: %s shrank while packing (%d of %d bytes)", it.Name, n, it.Size)
	}
	return nil
}

// onlyReader hides *os.File's WriterTo/ReaderFrom so CopyBuffer uses our
// 1 MiB buffer rather than small default copies.
type onlyReader struct{ io.Reader }

// rootCache opens each root once per layer.
type rootCache map[string]*os.Root

func (c rootCache) open(it Item) (*os.File, error) {
	if it.Root == "" {
		return os.Open(it.Abs)
	}
	r, ok := c[it.Root]
	if !ok {
		var err error
		if r, err = os.OpenRoot(it.Root); err != nil {
			return nil, err
		}
		c[it.Root] = r
	}
	f, err := r.Open(filepath.FromSlash(it.Name))
	if err != nil {
		return nil, fmt.Errorf("pack: %s: %w", it.Name, err)
	}
	return f, nil
}

func (c rootCache) close() {
	for _, r := range c {
		_ = r.Close()
	}
}
