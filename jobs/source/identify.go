package source

import (
	"context"
	"strings"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/internal/gitrepo"
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

// gitCommit is the commit a fetch of s would check out, where the remote's
// refs name it (see gitrepo.Resolve).
func gitCommit(ctx context.Context, s v1alpha1.GitSource, env Env) (string, bool) {
	auth, err := gitAuth(env.SourceAuthDir, s.URL)
	if err != nil {
		return "", false
	}
	commit, ok, err := gitrepo.Resolve(ctx, s.URL, s.Ref, auth)
	return commit, ok && err == nil
}
