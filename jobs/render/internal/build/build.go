// Package build runs kustomize in-process (krusty) inside a sandbox: an
// in-memory filesystem holding only the template repository's snapshot and
// the generated overlay, with plugins disabled, root-only load
// restrictions, and the guard's check for remote bases, escaping paths,
// symlinks and Helm charts before anything runs.
package build

import (
	"fmt"
	"path"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render/internal/guard"
	"github.com/packline/packline/jobs/render/internal/overlay"
	"github.com/packline/packline/jobs/render/source"
)

// Where the sandbox keeps the repository and the overlay. The overlay is a
// sibling of the repository, not inside it, so no template file can shadow
// a generated one.
const (
	RepoDir    = "/repo"
	OverlayDir = "/overlay"
	// RepoFromOverlay is RepoDir as the overlay refers to it.
	RepoFromOverlay = "../repo"
)

// Options returns krusty's options for untrusted templates: no exec or
// Go plugins, no Helm, and each kustomization may load files only from
// its own directory tree. Exposed so the benchmark times exactly this.
func Options() *krusty.Options {
	o := krusty.MakeDefaultOptions()
	o.PluginConfig = types.DisabledPluginConfig()
	o.LoadRestrictions = types.LoadRestrictionsRootOnly
	// Keep the order kustomize's legacy sort gives (namespaces and CRDs
	// first): stable for a given template, and what kubectl users expect.
	o.Reorder = krusty.ReorderOptionLegacy
	return o
}

// Sandbox writes snap and ov into a fresh in-memory filesystem.
func Sandbox(snap *source.Snapshot, ov *overlay.Overlay) (filesys.FileSystem, guard.Tree, error) {
	fs := filesys.MakeFsInMemory()
	write := func(p string, b []byte) error {
		if err := fs.MkdirAll(path.Dir(p)); err != nil {
			return err
		}
		return fs.WriteFile(p, b)
	}
	if err := fs.MkdirAll(RepoDir); err != nil {
		return nil, guard.Tree{}, err
	}
	for p, b := range snap.Files {
		if err := write(path.Join(RepoDir, p), b); err != nil {
			return nil, guard.Tree{}, fmt.Errorf("sandbox %s: %w", p, err)
		}
	}
	k, err := ov.YAML()
	if err != nil {
		return nil, guard.Tree{}, err
	}
	if err := write(path.Join(OverlayDir, "kustomization.yaml"), k); err != nil {
		return nil, guard.Tree{}, err
	}
	for p, b := range ov.Files {
		// Generated file names carry names from the template (a
		// generator's name): one must not land outside the overlay, where
		// it could replace a template file.
		dst := path.Join(OverlayDir, p)
		if path.IsAbs(p) || !strings.HasPrefix(dst, OverlayDir+"/") {
			return nil, guard.Tree{}, failure.Permanent(workerv1.ReasonTemplateRejected,
				fmt.Errorf("generated overlay file %q would be written outside the overlay; generator names may not hold '/' or '..'", p))
		}
		if fs.Exists(dst) {
			return nil, guard.Tree{}, failure.Permanent(workerv1.ReasonTemplateRejected,
				fmt.Errorf("generated overlay file %q would replace another overlay file", p))
		}
		if err := write(dst, b); err != nil {
			return nil, guard.Tree{}, failure.Permanent(workerv1.ReasonTemplateRejected,
				fmt.Errorf("generated overlay file %q cannot be written (check the generator names): %w", p, err))
		}
	}
	links := map[string]bool{}
	for p := range snap.Symlinks {
		links[path.Join(RepoDir, p)] = true
	}
	return fs, guard.Tree{FS: fs, Roots: []string{RepoDir, OverlayDir}, Symlinks: links}, nil
}

// Limits bound a build before and while krusty runs; zero fields take the
// defaults.
type Limits struct {
	// MaxObjects bounds the objects the kustomization graph can produce,
	// estimated before krusty runs (see guard.Tree.Estimate).
	MaxObjects int64
	// MaxBytes bounds the resource bytes the graph includes, each file
	// counted once per path that includes it, estimated likewise.
	MaxBytes int64
	// Timeout bounds krusty's run itself.
	Timeout time.Duration
}

// Defaults: a workload's template renders tens of objects from kilobytes
// in milliseconds; these are two orders of magnitude above that.
const (
	DefaultMaxObjects = 1000
	DefaultMaxBytes   = 32 << 20
	DefaultTimeout    = time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	return l
}

// Run is RunLimited with the default limits.
func Run(snap *source.Snapshot, ov *overlay.Overlay) (resmap.ResMap, error) {
	return RunLimited(snap, ov, Limits{})
}

// RunLimited checks and renders the overlay. Kustomize errors are
// permanent: the same template and values fail the same way on every
// attempt. krusty runs with the network cut off (see offline), and only
// once the estimate of what it would build is within l; a run past
// l.Timeout is abandoned. (krusty takes no context, so its goroutine is
// left to finish on its own: the worker exits right after reporting.)
func RunLimited(snap *source.Snapshot, ov *overlay.Overlay, l Limits) (resmap.ResMap, error) {
	l = l.withDefaults()
	fs, tree, err := Sandbox(snap, ov)
	if err != nil {
		return nil, err
	}
	if err := tree.Check(OverlayDir); err != nil {
		return nil, err
	}
	size, err := tree.Estimate(OverlayDir)
	if err != nil {
		return nil, err
	}
	if size.Objects > l.MaxObjects || size.Bytes > l.MaxBytes {
		return nil, failure.Permanent(workerv1.ReasonRenderTooLarge, fmt.Errorf(
			"the template would render about %d objects from %d bytes of resources (limits %d objects, %d bytes): nested bases multiply what they include",
			size.Objects, size.Bytes, l.MaxObjects, l.MaxBytes))
	}

	type built struct {
		m     resmap.ResMap
		tried string
		err   error
	}
	done := make(chan built, 1)
	go func() {
		var b built
		b.tried, b.err = offline(func() error {
			var err error
			b.m, err = krusty.MakeKustomizer(Options()).Run(fs, OverlayDir)
			return err
		})
		done <- b
	}()
	timer := time.NewTimer(l.Timeout)
	defer timer.Stop()
	var b built
	select {
	case b = <-done:
	case <-timer.C:
		return nil, failure.Permanent(workerv1.ReasonRenderTooLarge,
			fmt.Errorf("kustomize build did not finish within %s", l.Timeout))
	}
	if b.tried != "" {
		return nil, failure.Permanent(workerv1.ReasonTemplateRejected,
			fmt.Errorf("the template tried to fetch %s: renders have no network access, the template must be self-contained in its repository", b.tried))
	}
	if b.err != nil {
		return nil, failure.Permanent(workerv1.ReasonRenderFailed, fmt.Errorf("kustomize build: %w", b.err))
	}
	return b.m, nil
}
