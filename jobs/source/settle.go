package source

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The packer writes each file's mode into the layer (as kit does), and a
// ModelPack records each file's modification time. What a fetch leaves on
// disk must therefore describe the source, not this pod's umask or clock,
// or the same source would give different digests on different runs.

// epoch stands for an unknown time, so that it is the same on every run.
var epoch = time.Unix(0, 0)

// settle gives the files of a fresh Git checkout or Hub download the modes
// their source defines and the source's time: folders 0755, files 0755 when
// any execute bit is set (Git keeps only that bit; a Hub file has none)
// and 0644 otherwise. .git is left alone.
func settle(root string, t time.Time) error {
	if t.IsZero() {
		t = epoch
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		} else if info, err := d.Info(); err != nil {
			return err
		} else if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		return os.Chtimes(p, t, t)
	})
}

// archiveMode is the mode an archive entry is extracted with: its own
// permission bits (no setuid, setgid or sticky), plus the owner bits the
// worker needs to pack the file (read) or to clear the folder on the next
// attempt (read, write, search).
func archiveMode(m fs.FileMode, dir bool) fs.FileMode {
	if dir {
		return m.Perm() | 0o700
	}
	return m.Perm() | 0o400
}
