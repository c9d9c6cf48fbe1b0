package source

import (
	"context"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/packline/packline/api/v1alpha1"
)

// Identify names, without fetching any content, the revision a Fetch of s
// would record, where the source states it: a Git commit (the ref itself
// when it is one, else the remote's refs, as `git ls-remote` lists them),
// or an HTTP download's sha256 when the spec gives it. ok is false for
// other sources (a Hub model's files carry identities of their own, see
// Fetched.FileIDs; a volume has none) and whenever the lookup fails: the
// fetch then runs as usual and reports the failure itself.
func Identify(ctx context.Context, s v1alpha1.ArtifactSource, env Env) (revision string, ok bool) {
	switch {
	case s.Git != nil:
		return gitCommit(ctx, *s.Git, env)
	case s.HTTP != nil && regexpSHA256.MatchString(strings.ToLower(s.HTTP.SHA256)):
		return "sha256:" + strings.ToLower(s.HTTP.SHA256), true
	}
	return "", false
}

func gitCommit(ctx context.Context, s v1alpha1.GitSource, env Env) (string, bool) {
	ref := firstOf(s.Ref, "main")
	if regexpSHA.MatchString(ref) {
		return ref, true
	}
	auth, err := gitAuth(env.SourceAuthDir, s.URL)
	if err != nil {
		return "", false
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return "", false
	}
	byName := map[string]string{}
	for _, r := range refs {
		if r.Type() == plumbing.HashReference {
			byName[r.Name().String()] = r.Hash().String()
		}
	}
	// The same order as fetchGit: a branch, then a tag; an annotated tag
	// is peeled to its commit, which is what the clone checks out.
	for _, name := range []string{
		plumbing.NewBranchReferenceName(ref).String(),
		plumbing.NewTagReferenceName(ref).String() + "^{}",
		plumbing.NewTagReferenceName(ref).String(),
	} {
		if h, ok := byName[name]; ok {
			return h, true
		}
	}
	return "", false
}
