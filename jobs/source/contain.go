package source

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// errLeaves is returned by contained for a path that resolves outside its
// root.
var errLeaves = errors.New("leaves its root")

// contained resolves rel (a slash path) under root, following symbolic
// links, and returns the resolved absolute path. It refuses an absolute
// rel or one with "..", and any rel that resolves outside the resolved root:
// checking only the text, or only the last element, lets a symlinked
// parent folder ("link/sub" with link -> /) lead anywhere.
func contained(root, rel string) (string, error) {
	if path.IsAbs(filepath.ToSlash(rel)) || filepath.IsAbs(rel) {
		return "", errLeaves
	}
	c := path.Clean(filepath.ToSlash(rel))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errLeaves
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", root, err)
	}
	p, err := filepath.EvalSymlinks(filepath.Join(realRoot, filepath.FromSlash(c)))
	if err != nil {
		return "", err
	}
	if !inside(realRoot, p) {
		return "", errLeaves
	}
	return p, nil
}

// inside reports whether p is root or below it; both are clean and absolute.
func inside(root, p string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// dirIn is contained for a folder: rel must resolve inside root to a folder.
func dirIn(root, rel string) (string, error) {
	p, err := contained(root, rel)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a folder", rel)
	}
	return p, nil
}
