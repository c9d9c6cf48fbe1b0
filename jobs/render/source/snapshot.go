package source

import (
	"fmt"
	"io"
	"path"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// Limits bound how much of a template repository is read into memory.
type Limits struct {
	MaxFiles int
	MaxBytes int64
}

// Default limits: far beyond any manifests repository, small enough that a
// repository of model weights fails fast instead of exhausting the pod.
const (
	DefaultMaxFiles = 20000
	DefaultMaxBytes = 64 << 20
)

// Snapshot is a commit's tree held in memory: regular files only.
type Snapshot struct {
	// Files maps slash paths (no leading slash) to content.
	Files map[string][]byte
	// Symlinks are the paths of symbolic links in the tree. They are not
	// followed or copied: a link could point outside the repository.
	Symlinks map[string]bool
}

// readTree copies the regular files of commit's tree into a Snapshot.
// Submodules are not fetched; their paths simply do not exist.
func readTree(c *object.Commit, l Limits) (*Snapshot, error) {
	if l.MaxFiles == 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("reading tree of %s: %w", c.Hash, err)
	}
	s := &Snapshot{Files: map[string][]byte{}, Symlinks: map[string]bool{}}
	var total int64
	err = tree.Files().ForEach(func(f *object.File) error {
		p := path.Clean(f.Name)
		switch f.Mode {
		case filemode.Symlink:
			s.Symlinks[p] = true
			return nil
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
		default:
			return nil
		}
		if len(s.Files) >= l.MaxFiles {
			return failure.Permanent(workerv1.ReasonSourceFailed,
				fmt.Errorf("template repository has more than %d files", l.MaxFiles))
		}
		total += f.Size
		if total > l.MaxBytes {
			return failure.Permanent(workerv1.ReasonSourceFailed,
				fmt.Errorf("template repository is larger than %d bytes", l.MaxBytes))
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(io.LimitReader(r, f.Size+1))
		if err != nil {
			return err
		}
		s.Files[p] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
