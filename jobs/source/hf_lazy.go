package source

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// hfLazy lays out the files in a tree of their own next to the download
// folder: a file downloaded by an earlier attempt is hard-linked in, any
// other is a sparse placeholder of its size until Complete downloads it
// and links it over. Placeholders never enter the download folder, so a
// retry can never take one for a finished download; the tree is rebuilt
// on every run.
func hfLazy(ctx context.Context, f Fetched, files []hfFile, download func(context.Context, []hfFile, Tee) error) (Fetched, error) {
	cache := f.Root
	tree := cache + ".tree"
	if err := os.RemoveAll(tree); err != nil {
		return Fetched{}, err
	}
	pending := map[string]hfFile{}
	var now []hfFile // unknown size: no placeholder possible
	for _, hf := range files {
		dst := filepath.Join(tree, filepath.FromSlash(hf.name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return Fetched{}, err
		}
		src := filepath.Join(cache, filepath.FromSlash(hf.name))
		if fi, err := os.Stat(src); err == nil && (hf.size < 0 || fi.Size() == hf.size) && os.Link(src, dst) == nil {
			continue
		}
		if hf.size < 0 {
			now = append(now, hf)
			continue
		}
		if err := placeholder(dst, hf.size); err != nil {
			return Fetched{}, err
		}
		pending[hf.name] = hf
	}
	link := func(hfs []hfFile) error {
		for _, hf := range hfs {
			dst := filepath.Join(tree, filepath.FromSlash(hf.name))
			if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			src := filepath.Join(cache, filepath.FromSlash(hf.name))
			if err := os.Link(src, dst); err != nil {
				if err := os.Rename(src, dst); err != nil {
					return err
				}
			}
			if err := os.Chmod(dst, 0o644); err != nil {
				return err
			}
			t := f.Time
			if t.IsZero() {
				t = epoch
			}
			if err := os.Chtimes(dst, t, t); err != nil {
				return err
			}
		}
		return nil
	}
	if len(now) > 0 {
		if err := download(ctx, now, nil); err != nil {
			return Fetched{}, err
		}
		if err := link(now); err != nil {
			return Fetched{}, err
		}
	}
	if err := settle(tree, f.Time); err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, err)
	}
	var mu sync.Mutex
	f.Root = tree
	f.Complete = func(ctx context.Context, names []string, tee Tee) error {
		mu.Lock()
		defer mu.Unlock()
		var want []hfFile
		for _, n := range names {
			if hf, ok := pending[n]; ok {
				want = append(want, hf)
			}
		}
		if len(want) == 0 {
			return nil
		}
		if err := download(ctx, want, tee); err != nil {
			return err
		}
		if err := link(want); err != nil {
			return err
		}
		for _, hf := range want {
			delete(pending, hf.name)
		}
		return nil
	}
	return f, nil
}

// placeholder creates a sparse file of size bytes: it takes no space and
// gives the packer the size its tar header needs.
func placeholder(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
