package kitfile

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"
)

// Validate checks k against the files under root: a manifest version, at
// least one layer, and every path relative, inside root, present, a regular
// file or folder (not a symlink, nor through one), and not repeated. A path may lie inside
// another entry's folder, as kit allows: the packer leaves it out of the
// outer layer, so no file is packed twice.
//
// "Inside root" is checked on the resolved path, not only the text: a path
// whose parent folder is a symbolic link ("link/token" with link pointing
// at a mounted Secret) is refused, whatever the link points at.
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
	if err := printableNames(k); err != nil {
		return err
	}
	var seen []string
	for _, e := range entries {
		p, err := cleanRel(e.Path)
		if err != nil {
			return fmt.Errorf("kitfile: %s path %q: %w", e.Kind, e.Path, err)
		}
		if err := noLinks(root, p); err != nil {
			return fmt.Errorf("kitfile: %s path %q: %w", e.Kind, e.Path, err)
		}
		if err := checkTree(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("kitfile: %s path %q: %w", e.Kind, e.Path, err)
		}
		for _, s := range seen {
			if s == p {
				return fmt.Errorf("kitfile: %s path %q is already packed by another entry", e.Kind, e.Path)
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

// noLinks checks that rel, under root, resolves to itself: no element of
// it is a symbolic link, so it cannot lead out of root.
func noLinks(root, rel string) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("resolving the root: %w", err)
	}
	want := filepath.Join(realRoot, filepath.FromSlash(rel))
	// Walk down one element at a time with Lstat: EvalSymlinks on the whole
	// path would follow a link out of root before we could look at it.
	cur := realRoot
	for _, part := range strings.Split(rel, "/") {
		if part == "." {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			if os.IsNotExist(err) {
				return errors.New("does not exist")
			}
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			rel, _ := filepath.Rel(realRoot, cur)
			return fmt.Errorf("passes through %s, a symbolic link; links are not packed or followed", filepath.ToSlash(rel))
		}
	}
	if cur != want {
		return errors.New("leaves the root")
	}
	return nil
}

// checkTree refuses an entry that is neither a regular file nor a folder.
// Links and special files inside a folder are not refused: the packer skips
// them without following them, as kit does.
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
	return nil
}

// printableNames refuses a control or invisible formatting character (NUL,
// BEL, ESC, U+202E and the other bidirectional overrides) in the names
// that become the package's name: kit and registry UIs would print them
// as they are, showing one name while storing another. They come from
// spec.kitfile, or from the source (a file or repository name).
func printableNames(k *Kitfile) error {
	names := []struct{ field, v string }{{"package.name", k.Package.Name}}
	if k.Model != nil {
		names = append(names, struct{ field, v string }{"model.name", k.Model.Name})
	}
	for _, n := range names {
		for _, r := range n.v {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				return fmt.Errorf("kitfile: %s %q contains %U, a control or formatting character: set a plain %s in spec.kitfile (by default it is the source's file or repository name)", n.field, n.v, r, n.field)
			}
		}
	}
	return nil
}
