package source

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/kitfile"
)

// findVolume resolves the source path inside the mounted PVC without copying:
// the packer streams from there. The path must stay inside the mount even
// after resolving symlinks. The revision fingerprints the file listing
// (names, sizes, modification times, modes), as reading every byte just to name the
// revision would double the work. For the same reason each file's identity
// (FileIDs, which lets a re-run skip layers the registry has) is its stat
// fingerprint, not a hash: a re-run of an unchanged volume reads nothing,
// and a first run still reads every byte once, while uploading it. Those
// ids are local (a `cp -a` copy gets others), so they never reach the
// pushed manifest (LocalIDs): the digest follows content only.
func findVolume(v v1alpha1.VolumeSource, env Env) (Fetched, error) {
	p := path.Clean("/" + filepath.ToSlash(v.Path))
	if strings.Contains(v.Path, "..") && p == "/" {
		return Fetched{}, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("volume path %q leaves the volume", v.Path))
	}
	mount, err := filepath.EvalSymlinks(env.SourceVolumeDir)
	if err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("volume mount: %w", err))
	}
	want := filepath.Join(mount, filepath.FromSlash(v.Path))
	root, err := filepath.EvalSymlinks(want)
	if err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("volume path %q: %w", v.Path, err))
	}
	if rel, err := filepath.Rel(mount, root); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return Fetched{}, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("volume path %q leaves the volume", v.Path))
	}
	fi, err := os.Stat(root)
	if err != nil || !fi.IsDir() {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("volume path %q is not a folder", v.Path))
	}
	files, err := kitfile.List(root)
	if err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, err)
	}
	h := sha256.New()
	ids := map[string]string{}
	var newest time.Time
	for _, f := range files {
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, err)
		}
		// The mode is part of the layer, so it is part of the revision.
		fmt.Fprintf(h, "%q %d %d %o\n", f.Path, f.Size, st.ModTime().UnixNano(), st.Mode())
		if id := statID(st); id != "" {
			ids[f.Path] = id
		}
		if st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	name := v.ClaimName
	if v.Path != "" {
		name = path.Base(p)
	}
	// A volume is packed in place: modes and times are the files' own.
	return Fetched{Root: root, Revision: fmt.Sprintf("listing:sha256:%x", h.Sum(nil)), Name: name, Time: newest, FileIDs: ids, LocalIDs: true}, nil
}
