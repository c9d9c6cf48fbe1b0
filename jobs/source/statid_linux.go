package source

import (
	"fmt"
	"io/fs"
	"syscall"
)

// statID fingerprints a volume file without reading it: size, modification
// and change times, inode and device. Writing a file moves its ctime, which
// no user can set back (unlike mtime), so the same fingerprint means the
// same content as far as the kernel can tell; a file replaced by another
// (a new inode) gets a new one too.
func statID(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("stat:%d:%d:%d.%09d:%d:%d", fi.Size(), fi.ModTime().UnixNano(), st.Ctim.Sec, st.Ctim.Nsec, st.Ino, st.Dev)
}
