// Package guard checks a Kustomize build before it runs, for what krusty's
// own options do not stop: remote bases and remote files, paths that leave
// the sandbox, symlinks, and Helm charts.
//
// krusty's root-only load restriction stops a kustomization from reading
// files outside its own directory, but it still lets a resource or
// component directory live anywhere, fetches any http(s) file it is asked
// to load, and runs `git clone` for a remote base. The render filesystem is
// in memory, so none of those could reach the worker's disk anyway; the
// guard turns them into one clear error before any network call or exec.
//
// The guard walks every kustomization field that loads content, and treats
// generators, transformers and validators like resources: each entry is a
// file, a directory holding a kustomization (walked too), or an inline
// plugin configuration. Builtin plugin configurations (apiVersion builtin),
// wherever they sit in the tree, are read for the fields their plugins
// load (path, paths, files, envs, …). It is the first of two layers: the
// build also runs krusty with the network cut off (see package build), for
// anything a kustomization could assemble that no static check can see.
package guard

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// IsRemote reports whether p is something kustomize would fetch rather
// than read from the filesystem: a URL, an scp-like or "git::" git
// address, the scheme-less "github.com/org/repo" form kustomize clones, or
// a path with a ref query.
func IsRemote(p string) bool {
	lower := strings.ToLower(p)
	return strings.Contains(p, "://") || strings.HasPrefix(p, "git@") || strings.HasPrefix(p, "git::") ||
		strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") ||
		strings.Contains(p, "?ref=") || strings.Contains(p, "?version=")
}

// Tree is the sandbox: the in-memory filesystem and what it may be read from.
type Tree struct {
	FS filesys.FileSystem
	// Roots are the absolute directories paths may resolve into (the
	// repository and the generated overlay).
	Roots []string
	// Symlinks are absolute paths of symbolic links the repository had;
	// they were not copied, and naming one is refused.
	Symlinks map[string]bool
}

// Check walks every kustomization reachable from dir and refuses any
// reference that is remote, outside the roots, a symlink, or missing, and
// any Helm chart.
func (t Tree) Check(dir string) error {
	seen := map[string]bool{}
	queue := []string{path.Clean(dir)}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen[d] {
			continue
		}
		seen[d] = true
		k, file, err := t.load(d)
		if err != nil {
			return err
		}
		subdirs, err := t.checkKustomization(d, file, k)
		if err != nil {
			return err
		}
		queue = append(queue, subdirs...)
	}
	return t.checkPluginConfigs()
}

func (t Tree) load(dir string) (*types.Kustomization, string, error) {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := path.Join(dir, name)
		if !t.FS.Exists(p) {
			continue
		}
		b, err := t.FS.ReadFile(p)
		if err != nil {
			return nil, "", err
		}
		var k types.Kustomization
		if err := yaml.Unmarshal(b, &k); err != nil {
			return nil, "", failure.Permanent(workerv1.ReasonRenderFailed, fmt.Errorf("%s: %w", t.display(p), err))
		}
		k.FixKustomization()
		return &k, p, nil
	}
	return nil, "", failure.Permanent(workerv1.ReasonRenderFailed, fmt.Errorf("%s has no kustomization.yaml", t.display(dir)))
}

// checkKustomization checks one kustomization and returns the directories
// it builds on.
func (t Tree) checkKustomization(dir, file string, k *types.Kustomization) ([]string, error) {
	where := t.display(file)
	if len(k.HelmCharts) > 0 || len(k.HelmChartInflationGenerator) > 0 || k.HelmGlobals != nil {
		return nil, rejected("%s inflates a Helm chart, which needs the helm binary and is not allowed", where)
	}
	var dirs []string
	// Resources, components and bases may be directories to build on, and
	// so may generators, transformers and validators: a directory there is
	// a kustomization whose output is plugin configurations. An entry of
	// those three that spans lines is an inline configuration.
	firstPlugin := len(k.Resources) + len(k.Components) + len(k.Bases)
	for i, r := range slices.Concat(k.Resources, k.Components, k.Bases, k.Generators, k.Transformers, k.Validators) {
		if i >= firstPlugin && strings.Contains(r, "\n") {
			if err := t.checkInlineConfig(r, where); err != nil {
				return nil, err
			}
			continue
		}
		p, err := t.resolve(dir, r, where)
		if err != nil {
			return nil, err
		}
		if t.FS.IsDir(p) {
			dirs = append(dirs, p)
		}
	}
	// Everything else names a file to load.
	var files []string
	files = append(files, k.Crds...)
	files = append(files, k.Configurations...)
	if p, ok := k.OpenAPI["path"]; ok {
		files = append(files, p)
	}
	for _, p := range k.Patches {
		files = append(files, p.Path)
	}
	for _, p := range k.PatchesJson6902 {
		files = append(files, p.Path)
	}
	for _, p := range k.PatchesStrategicMerge {
		// An inline patch spans lines; a path does not.
		if s := string(p); !strings.Contains(s, "\n") {
			files = append(files, s)
		}
	}
	for _, r := range k.Replacements {
		files = append(files, r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		files = append(files, sourceFiles(g.GeneratorArgs)...)
	}
	for _, g := range k.SecretGenerator {
		files = append(files, sourceFiles(g.GeneratorArgs)...)
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if _, err := t.resolve(dir, f, where); err != nil {
			return nil, err
		}
	}
	return dirs, nil
}

// sourceFiles are the file paths of a generator ("key=path" or "path").
func sourceFiles(g types.GeneratorArgs) []string {
	var out []string
	for _, s := range g.FileSources {
		if _, p, ok := strings.Cut(s, "="); ok {
			s = p
		}
		out = append(out, s)
	}
	out = append(out, g.EnvSources...)
	if g.EnvSource != "" {
		out = append(out, g.EnvSource)
	}
	return out
}

// resolve turns ref, relative to dir, into an absolute path that exists
// inside a root and is not a symlink.
func (t Tree) resolve(dir, ref, where string) (string, error) {
	if IsRemote(ref) {
		return "", rejected("%s refers to %q: remote bases and files are not allowed, the template must be self-contained in its repository", where, ref)
	}
	p := ref
	if !path.IsAbs(p) {
		p = path.Join(dir, p)
	}
	p = path.Clean(p)
	if !t.inRoots(p) {
		return "", rejected("%s refers to %q, which is outside the template repository", where, ref)
	}
	for q := p; t.inRoots(q); q = path.Dir(q) {
		if t.Symlinks[q] {
			return "", rejected("%s refers to %q, which is a symbolic link; templates may not use symlinks", where, ref)
		}
	}
	if !t.FS.Exists(p) {
		return "", failure.Permanent(workerv1.ReasonRenderFailed, fmt.Errorf("%s refers to %q, which does not exist", where, ref))
	}
	return p, nil
}

func (t Tree) inRoots(p string) bool {
	for _, r := range t.Roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// display shows a sandbox path relative to its root, as the template author
// knows it.
func (t Tree) display(p string) string {
	for _, r := range t.Roots {
		if strings.HasPrefix(p, r+"/") {
			return strings.TrimPrefix(p, r+"/")
		}
	}
	return p
}

func rejected(format string, a ...any) error {
	return failure.Permanent(workerv1.ReasonTemplateRejected, fmt.Errorf(format, a...))
}
