package gitrepo

import (
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// DefaultRef is the ref of a source that names none.
const DefaultRef = "main"

var (
	fullSHA  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	shortSHA = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
)

// Target is what a ref names, by the one rule both Git sources follow:
//
//  1. a full commit SHA (40 hex digits) is that commit;
//  2. else a ref the remote advertises: the exact full name ("refs/…"),
//     then a branch, then a tag (git's own order for a short name);
//  3. else an abbreviated SHA (7 to 39 hex digits) is a commit to find in
//     the history;
//  4. else nothing: no such branch or tag.
type Target struct {
	// Name is the branch or tag (a full ref name); empty for a commit.
	Name plumbing.ReferenceName
	// SHA is the commit SHA as given (perhaps abbreviated); empty for a
	// branch or tag.
	SHA string
}

// OrDefault returns ref, or DefaultRef when ref is empty.
func OrDefault(ref string) string {
	if ref == "" {
		return DefaultRef
	}
	return ref
}

// IsFullSHA reports whether ref is a full commit SHA: rule 1, which needs
// no look at the remote.
func IsFullSHA(ref string) bool { return fullSHA.MatchString(ref) }

// Pick applies the rule to ref and the names the remote advertises (see
// ListRefs); ok is false when ref names nothing.
func Pick(advertised []*plumbing.Reference, ref string) (t Target, ok bool) {
	if IsFullSHA(ref) {
		return Target{SHA: ref}, true
	}
	have := map[plumbing.ReferenceName]bool{}
	for _, r := range advertised {
		have[r.Name()] = true
	}
	for _, n := range candidates(ref) {
		if have[n] {
			return Target{Name: n}, true
		}
	}
	if shortSHA.MatchString(ref) {
		return Target{SHA: ref}, true
	}
	return Target{}, false
}

// candidates are the full names a ref may stand for, in rule 2's order.
func candidates(ref string) []plumbing.ReferenceName {
	var out []plumbing.ReferenceName
	if strings.HasPrefix(ref, "refs/") {
		out = append(out, plumbing.ReferenceName(ref))
	}
	return append(out, plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref))
}

// peeledHash returns the commit an advertised name points to: for an
// annotated tag the peeled entry ("refs/tags/v1^{}"), which is the commit
// a clone checks out, else the name's own hash.
func peeledHash(advertised []*plumbing.Reference, name plumbing.ReferenceName) (string, bool) {
	byName := map[string]string{}
	for _, r := range advertised {
		if r.Type() == plumbing.HashReference {
			byName[r.Name().String()] = r.Hash().String()
		}
	}
	for _, n := range []string{name.String() + "^{}", name.String()} {
		if h, ok := byName[n]; ok {
			return h, true
		}
	}
	return "", false
}
