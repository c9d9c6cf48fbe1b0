// Package pack writes a Kitfile entry (a file or a folder under the artifact
// root) as a reproducible tar layer, laid out as the kit CLI writes it:
// names relative to the root, with the entry's parent folders first, so that
// `kit unpack` recreates the Kitfile's paths.
//
// Reproducible means: entries in lexical order, zero times, uid/gid 0, fixed
// modes (0755 folders, 0644 files), no user or group names, and gzip (when
// asked for) without a name or timestamp. The same files give the same bytes.
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

	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/jobs/kitfile"
)

// Item is one tar entry of a layer.
type Item struct {
	Name    string // slash-separated, relative to the root
	Abs     string // where it is; part of the push cache's key
	Root    string // the root Name is read under, through an os.Root
	Dir     bool
	Size    int64
	ModTime time.Time // not written; part of the push cache's key
	Ino     uint64    // likewise
}

// Walk lists the entries of the layer for rel under root, in tar order.
func Walk(root, rel string) ([]Item, error) {
	rel = path.Clean(filepath.ToSlash(rel))
	var items []Item
	// Parent folders first, as kit's walk from the root emits them.
	if rel != "." {
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			name := strings.Join(parts[:i], "/")
			items = append(items, Item{Name: name, Abs: filepath.Join(root, filepath.FromSlash(name)), Root: root, Dir: true})
		}
	}
	start := filepath.Join(root, filepath.FromSlash(rel))
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != start && kitfile.Ignored(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name, _ := filepath.Rel(root, p)
		name = filepath.ToSlash(name)
		if name == "." {
			return nil // the root itself has no entry
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			items = append(items, Item{Name: name, Abs: p, Root: root, Dir: true, ModTime: fi.ModTime(), Ino: inode(fi)})
		case fi.Mode().IsRegular():
			items = append(items, Item{Name: name, Abs: p, Root: root, Size: fi.Size(), ModTime: fi.ModTime(), Ino: inode(fi)})
		default:
			return fmt.Errorf("pack: %s is not a regular file or folder", name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// Write streams the tar of items to w, gzipped if gz. It returns the diffID
// (the digest of the uncompressed tar) when gz is set; without gzip the
// caller's digest of w's bytes is the diffID.
func Write(w io.Writer, items []Item, gz bool) (digest.Digest, error) {
	var diff = sha256.New()
	tw := tar.NewWriter(w)
	var zw *gzip.Writer
	if gz {
		// BestSpeed: weights barely compress, and the CPU is shared.
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
		tw = tar.NewWriter(io.MultiWriter(zw, diff))
	}
	buf := make([]byte, 1<<20)
	roots := rootCache{}
	defer roots.close()
	for _, it := range items {
		if err := tw.WriteHeader(header(it)); err != nil {
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
	if zw != nil {
		if err := zw.Close(); err != nil {
			return "", err
		}
		return digest.NewDigest(digest.SHA256, diff), nil
	}
	return "", nil
}

func header(it Item) *tar.Header {
	h := &tar.Header{Name: it.Name, ModTime: time.Unix(0, 0)}
	if it.Dir {
		h.Typeflag, h.Mode = tar.TypeDir, 0o755
	} else {
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, it.Size
	}
	return h
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
