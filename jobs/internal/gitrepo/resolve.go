package gitrepo

import (
	"context"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
)

// ListRefs lists the refs the remote advertises, as `git ls-remote` does,
// annotated tags with their peeled entries.
func ListRefs(ctx context.Context, url string, auth transport.AuthMethod) ([]*plumbing.Reference, error) {
	r := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	return r.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
}

// Resolve names, without fetching any content, the commit a Clone of ref
// would check out. ok is false where that takes the history (an
// abbreviated SHA) or the ref names nothing; err is the listing's error,
// unclassified.
func Resolve(ctx context.Context, url, ref string, auth transport.AuthMethod) (commit string, ok bool, err error) {
	ref = OrDefault(ref)
	if IsFullSHA(ref) {
		return ref, true, nil
	}
	refs, err := ListRefs(ctx, url, auth)
	if err != nil {
		return "", false, err
	}
	t, ok := Pick(refs, ref)
	if !ok || t.Name == "" {
		return "", false, nil
	}
	commit, ok = peeledHash(refs, t.Name)
	return commit, ok, nil
}
