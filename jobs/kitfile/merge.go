package kitfile

import (
	"path"
	"slices"
)

// Merge overlays user on gen; user wins. Package and model scalars the user
// sets replace the generated ones; a section the user lists (model path,
// parts, code, datasets, docs) replaces the generated section; and generated
// entries whose path the user's entries already cover are dropped, so a file
// is never packed twice.
func Merge(gen, user *Kitfile) *Kitfile {
	if user == nil {
		return gen
	}
	out := *gen
	if user.ManifestVersion != "" {
		out.ManifestVersion = user.ManifestVersion
	}
	out.Package = mergePackage(gen.Package, user.Package)
	out.Model = mergeModel(gen.Model, user.Model)
	if len(user.Code) > 0 {
		out.Code = user.Code
	}
	if len(user.DataSets) > 0 {
		out.DataSets = user.DataSets
	}
	if len(user.Docs) > 0 {
		out.Docs = user.Docs
	}
	dropCovered(&out, user)
	return &out
}

func mergePackage(g, u Package) Package {
	pick(&g.Name, u.Name)
	pick(&g.Version, u.Version)
	pick(&g.Description, u.Description)
	pick(&g.License, u.License)
	if len(u.Authors) > 0 {
		g.Authors = u.Authors
	}
	return g
}

func mergeModel(g, u *Model) *Model {
	if u == nil {
		return g
	}
	if g == nil {
		c := *u
		return &c
	}
	m := *g
	if u.Path != "" && u.Path != g.Path {
		// A different main model: the generated name no longer describes it.
		m.Path, m.Name = u.Path, ""
	}
	pick(&m.Name, u.Name)
	pick(&m.License, u.License)
	pick(&m.Framework, u.Framework)
	pick(&m.Format, u.Format)
	pick(&m.Version, u.Version)
	pick(&m.Description, u.Description)
	if u.Parameters != nil {
		m.Parameters = u.Parameters
	}
	if len(u.Parts) > 0 {
		m.Parts = u.Parts
	}
	return &m
}

func pick(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// dropCovered removes entries not from the user whose path equals or lies
// under a path the user named.
func dropCovered(k *Kitfile, user *Kitfile) {
	var userPaths []string
	for _, e := range user.Entries() {
		userPaths = append(userPaths, path.Clean(e.Path))
	}
	covered := func(p string) bool {
		p = path.Clean(p)
		for _, u := range userPaths {
			if p == u || u == "." || isUnder(p, u) {
				return true
			}
		}
		return false
	}
	fromUser := func(p string) bool { return slices.Contains(userPaths, path.Clean(p)) }
	keep := func(p string) bool { return fromUser(p) || !covered(p) }

	if m := k.Model; m != nil {
		if m.Path != "" && !keep(m.Path) {
			// The generated main model is covered by a user entry; promote
			// nothing, the user's entry carries the file.
			m.Path, m.Name = "", ""
		}
		m.Parts = slices.DeleteFunc(m.Parts, func(p ModelPart) bool { return !keep(p.Path) })
		if m.Path == "" && len(m.Parts) == 0 && user.Model == nil {
			k.Model = nil
		}
	}
	k.Code = slices.DeleteFunc(k.Code, func(c Code) bool { return !keep(c.Path) })
	k.DataSets = slices.DeleteFunc(k.DataSets, func(d DataSet) bool { return !keep(d.Path) })
	k.Docs = slices.DeleteFunc(k.Docs, func(d Docs) bool { return !keep(d.Path) })
}

// isUnder reports whether p is strictly inside dir (both clean, slash-separated).
func isUnder(p, dir string) bool {
	return len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/'
}
