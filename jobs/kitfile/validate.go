package kitfile

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Validate checks k against the files under root: a manifest version, at
// least one layer, and every path relative, inside root, present, a regular
// file or folder (no symlinks), and neither repeated nor nested in another.
func Validate(k *Kitfile, root string) error {
	if k.ManifestVersion == "" {
		return errors.New("kitfile: manifestVersion is empty")
	}
	entries := k.Entries()
	if len(entries) == 0 {
		return errors.New("kitfile: nothing to pack (no model, code, datasets or docs)")
	}
	if k.Model != nil && k.Model.Path == "" && len(k.Model.Parts) > 0 {
		return errors.New("kitfile: model has parts but no path")
	}
	var seen []string
	for _, e := range entries {
		p, err := cleanRel(e.Path)
		if err != nil {
			return fmt.Errorf("kitfile: %s path %q: %w", e.Kind, e.Path, err)
		}
		if err := checkTree(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("kitfile: %s path %q: %w", e.Kind, e.Path, err)
		}
		for _, s := range seen {
			if s == p || s == "." || p == "." || isUnder(p, s) || isUnder(s, p) {
				return fmt.Errorf("kitfile: %s path %q overlaps %q", e.Kind, e.Path, s)
			}
		}
		seen = append(seen, p)
	}
	return nil
}

// cleanRel returns p cleaned, refusing absolute paths and "..".
func cleanRel(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("is empty")
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", errors.New("is absolute")
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errors.New("leaves the root")
	}
	return c, nil
}

// checkTree refuses anything but regular files and folders under p.
func checkTree(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		if os.IsNotExist(err) {
			return errors.New("does not exist")
		}
		return err
	}
	if fi.Mode().IsRegular() {
		return nil
	}
	if !fi.IsDir() {
		return fmt.Errorf("is not a regular file or folder (%s)", fi.Mode().Type())
	}
	return filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("holds %s, which is not a regular file", q)
		}
		return nil
	})
}
