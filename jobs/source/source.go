// Package source fetches an Artifact's content into the workspace (or, for
// a volume, finds it in place) and records the revision it came from.
// Each kind of source lives in its own file.
package source

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/netx"
)

// Env is where a fetch reads and writes. The worker fills it from
// api/worker/v1's fixed paths; tests point it at temp folders.
type Env struct {
	// Workspace is the writable workspace folder.
	Workspace string
	// SourceAuthDir holds a Git Secret's keys as files.
	SourceAuthDir string
	// SourceVolumeDir is where a volume source's PVC is mounted.
	SourceVolumeDir string
	// HFToken and HFEndpoint come from the environment (HF_TOKEN, HF_ENDPOINT).
	HFToken, HFEndpoint string
	// Archive limits extraction of HTTP archives.
	Archive Limits
	// HTTP is the client for HTTP and Hugging Face sources.
	HTTP *http.Client
	// Log receives progress lines.
	Log io.Writer
	// Lazy lets a source whose files have identities (Hugging Face) lay
	// out its tree without the bytes: each file not yet downloaded is a
	// placeholder of its size, mode and time until Fetched.Complete
	// fetches it. The packer then fetches only the files of layers the
	// registry lacks.
	Lazy bool
}

// Fetched is what a source produced.
type Fetched struct {
	// Root is the folder to pack: Kitfile paths are relative to it.
	Root string
	// Revision pins what was fetched: a commit SHA, sha256:<hex>, ….
	Revision string
	// Name is a default package name (the repository's or file's name).
	Name string
	// URL is where the content came from, without credentials or query,
	// for the org.opencontainers.image.source annotation; empty for a volume.
	URL string
	// Time is the source's own time: the commit's, the Hub revision's, the
	// server's Last-Modified, the newest file's on a volume. Zero when
	// unknown. It is never the time of the run, so a re-run is identical.
	Time time.Time
	// FileIDs names each file's content (by its path under Root) by the
	// source's own identity: "sha256:<hex>" for a Hub LFS file,
	// "gitblob:<sha1>" for another Hub file or any file of a Git
	// checkout, "sha256:<hex>" for an HTTP download and
	// "in-archive:sha256:<hex>" for a file extracted from one (the
	// archive's; the path tells the files apart), "stat:…" for a volume file
	// (size, times, inode: what a change of content must change). Files
	// missing from it have none.
	FileIDs map[string]string
	// LocalIDs says FileIDs name files by where they lie (a volume's stat
	// fingerprints), not by content: a copy of the same files gets other
	// ids, so they must stay out of the pushed manifest
	// (push.Options.LocalFileIDs).
	LocalIDs bool
	// Prehashed are the digests of layers the fetch computed while it
	// downloaded (a plain HTTP file, as the layer of that one file); the
	// push uses one whose headers match a layer's (pack.Prehash.Matches).
	Prehashed []*pack.Prehash
	// Complete, set for a Lazy fetch, downloads the named files over
	// their placeholders. Names that are no placeholder are ignored. tee,
	// if set, names a writer for a file's bytes: a file downloaded whole
	// in this call is written to it as it arrives (see pack.Prehash); a
	// resumed one is not.
	Complete func(ctx context.Context, names []string, tee Tee) error
}

// Tee gives the writer that a file's downloaded bytes are copied to, or
// nil.
type Tee = func(name string) io.Writer

// FileID looks a file up in FileIDs.
func (f Fetched) FileID(name string) (string, bool) {
	id, ok := f.FileIDs[name]
	return id, ok
}

// Fetch dispatches to the source kind that is set. OCI sources are not
// fetched (see CopyOCI).
func Fetch(ctx context.Context, s v1alpha1.ArtifactSource, env Env) (Fetched, error) {
	if env.HTTP == nil {
		env.HTTP = netx.Client()
	}
	if env.Log == nil {
		env.Log = io.Discard
	}
	switch {
	case s.HuggingFace != nil:
		return fetchHF(ctx, *s.HuggingFace, env)
	case s.Git != nil:
		return fetchGit(ctx, *s.Git, env)
	case s.HTTP != nil:
		return fetchHTTP(ctx, *s.HTTP, env)
	case s.Volume != nil:
		return findVolume(*s.Volume, env)
	}
	return Fetched{}, failure.Permanent(workerv1.ReasonInvalidSpec, errors.New("source: no huggingFace, git, http or volume source set"))
}

// srcDir returns a fresh, empty folder in the workspace for name.
func srcDir(env Env, name string) (string, error) {
	dir := filepath.Join(env.Workspace, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// firstOf returns the first value that is not empty.
func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
