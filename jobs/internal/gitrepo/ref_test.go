package gitrepo

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-cmp/cmp"
)

const (
	sha1 = "0123456789abcdef0123456789abcdef01234567"
	sha2 = "89abcdef0123456789abcdef0123456789abcdef"
	sha3 = "fedcba9876543210fedcba9876543210fedcba98"
)

// advertised is what `git ls-remote` lists for a repository with a branch
// main, a lightweight tag v1, an annotated tag v2 (with its peeled entry)
// and a branch and a tag both named "dup".
func advertised() []*plumbing.Reference {
	h := plumbing.NewHashReference
	return []*plumbing.Reference{
		plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main"),
		h("refs/heads/main", plumbing.NewHash(sha1)),
		h("refs/tags/v1", plumbing.NewHash(sha1)),
		h("refs/tags/v2", plumbing.NewHash(sha3)),
		h("refs/tags/v2^{}", plumbing.NewHash(sha2)),
		h("refs/heads/dup", plumbing.NewHash(sha1)),
		h("refs/tags/dup", plumbing.NewHash(sha2)),
	}
}

func TestPick(t *testing.T) {
	type result struct {
		Target Target
		OK     bool
	}
	for _, tc := range []struct {
		ref  string
		want result
	}{
		{"main", result{Target{Name: "refs/heads/main"}, true}},
		{"refs/heads/main", result{Target{Name: "refs/heads/main"}, true}},
		{"v1", result{Target{Name: "refs/tags/v1"}, true}},
		{"refs/tags/v2", result{Target{Name: "refs/tags/v2"}, true}},
		{"dup", result{Target{Name: "refs/heads/dup"}, true}}, // a branch before a tag, as git does
		{sha2, result{Target{SHA: sha2}, true}},               // a full SHA needs no listing
		{sha2[:7], result{Target{SHA: sha2[:7]}, true}},       // an abbreviated one is found in the history
		{sha2[:6], result{}},  // too short to be a commit
		{"ABCDEF0", result{}}, // SHAs are lower case
		{"refs/heads/nope", result{}},
		{"nope", result{}},
		{"heads/main", result{}}, // only a full name or a short branch/tag name
	} {
		t.Run(tc.ref, func(t *testing.T) {
			got, ok := Pick(advertised(), tc.ref)
			if diff := cmp.Diff(tc.want, result{got, ok}); diff != "" {
				t.Errorf("Pick(%q) (-want +got):\n%s", tc.ref, diff)
			}
		})
	}
	// A full SHA is a commit without asking the remote.
	if got, ok := Pick(nil, sha3); !ok || got.SHA != sha3 {
		t.Errorf("Pick(nil, full SHA) = %+v, %v", got, ok)
	}
}

func TestPeeledHash(t *testing.T) {
	for _, tc := range []struct {
		name plumbing.ReferenceName
		want string
	}{
		{"refs/heads/main", sha1},
		{"refs/tags/v1", sha1},
		{"refs/tags/v2", sha2}, // the annotated tag's commit, not the tag object
		{"refs/tags/nope", ""},
	} {
		got, _ := peeledHash(advertised(), tc.name)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("peeledHash(%s) (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestOrDefault(t *testing.T) {
	if diff := cmp.Diff([]string{"main", "v1"}, []string{OrDefault(""), OrDefault("v1")}); diff != "" {
		t.Error(diff)
	}
}
