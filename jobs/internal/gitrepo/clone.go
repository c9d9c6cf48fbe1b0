package gitrepo

import (
	"context"
	"fmt"
	"os"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// Options say what to clone and where.
type Options struct {
	URL string
	// Ref is a branch, a tag, a full ref name or a commit SHA (see Target);
	// empty means DefaultRef.
	Ref string
	// Dir is where the clone is written; it is emptied first, because a
	// retry reuses the workspace of the failed attempt.
	Dir string
	// Auth is the repository's credential (see LoadAuth); nil clones
	// anonymously.
	Auth transport.AuthMethod
	// Checkout writes the commit's files into Dir; without it the clone is
	// bare and the files are read from Commit's tree.
	Checkout bool
}

// Cloned is the clone and the commit its ref resolved to.
type Cloned struct {
	Repo *git.Repository
	// Ref is the ref that was asked for, defaulted to DefaultRef.
	Ref string
	// Commit is the resolved commit, annotated tags peeled.
	Commit *object.Commit
	// IsSHA reports that Ref was a commit SHA rather than a branch or tag.
	IsSHA bool
}

// Clone fetches the repository at o.Ref. A branch or tag is cloned
// shallow; a commit SHA is not advertised, so it takes the history.
// Errors are classified (see Classify).
func Clone(ctx context.Context, o Options) (Cloned, error) {
	ref := OrDefault(o.Ref)
	t, err := target(ctx, o.URL, ref, o.Auth)
	if err != nil {
		return Cloned{}, err
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return Cloned{}, fmt.Errorf("clearing clone dir: %w", err)
	}
	repo, hash, err := cloneTarget(ctx, o, t)
	if err != nil {
		return Cloned{}, err
	}
	commit, err := peelCommit(repo, hash)
	if err != nil {
		return Cloned{}, err
	}
	if o.Checkout {
		if err := checkout(repo, commit.Hash); err != nil {
			return Cloned{}, Classify(err, o.URL, ref)
		}
	}
	return Cloned{Repo: repo, Ref: ref, Commit: commit, IsSHA: t.Name == ""}, nil
}

// target applies the ref rule; only a ref that is not a full SHA needs
// the remote's list.
func target(ctx context.Context, url, ref string, auth transport.AuthMethod) (Target, error) {
	var refs []*plumbing.Reference
	if !IsFullSHA(ref) {
		var err error
		if refs, err = ListRefs(ctx, url, auth); err != nil {
			return Target{}, Classify(err, url, ref)
		}
	}
	t, ok := Pick(refs, ref)
	if !ok {
		return Target{}, failure.Permanent(workerv1.ReasonSourceNotFound,
			fmt.Errorf("ref %q not found in %s: no such branch or tag", ref, publicURL(url)))
	}
	return t, nil
}

// cloneTarget clones what t names and returns the hash it points to.
func cloneTarget(ctx context.Context, o Options, t Target) (*git.Repository, plumbing.Hash, error) {
	ref := OrDefault(o.Ref)
	if t.Name != "" {
		repo, err := git.PlainCloneContext(ctx, o.Dir, !o.Checkout, &git.CloneOptions{
			URL: o.URL, Auth: o.Auth, ReferenceName: t.Name, SingleBranch: true,
			Depth: 1, Tags: git.NoTags, NoCheckout: true,
		})
		if err != nil {
			return nil, plumbing.ZeroHash, Classify(err, o.URL, ref)
		}
		r, err := repo.Reference(t.Name, true)
		if err != nil {
			return nil, plumbing.ZeroHash, Classify(fmt.Errorf("reading cloned ref %s: %w", t.Name, err), o.URL, ref)
		}
		return repo, r.Hash(), nil
	}
	repo, err := git.PlainCloneContext(ctx, o.Dir, !o.Checkout, &git.CloneOptions{
		URL: o.URL, Auth: o.Auth, Tags: git.NoTags, NoCheckout: true,
	})
	if err != nil {
		return nil, plumbing.ZeroHash, Classify(err, o.URL, ref)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(t.SHA))
	if err != nil {
		return nil, plumbing.ZeroHash, failure.Permanent(workerv1.ReasonSourceNotFound,
			fmt.Errorf("commit %s not found in %s", t.SHA, publicURL(o.URL)))
	}
	return repo, *h, nil
}

// peelCommit follows annotated tags down to the commit.
func peelCommit(repo *git.Repository, h plumbing.Hash) (*object.Commit, error) {
	for range 8 {
		if tag, err := repo.TagObject(h); err == nil {
			h = tag.Target
			continue
		}
		c, err := repo.CommitObject(h)
		if err != nil {
			return nil, failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("%s is not a commit: %w", h, err))
		}
		return c, nil
	}
	return nil, failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("%s: tag chain too deep", h))
}

func checkout(repo *git.Repository, h plumbing.Hash) error {
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	return wt.Checkout(&git.CheckoutOptions{Hash: h, Force: true})
}
