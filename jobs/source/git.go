package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/gitauth"
)

var regexpSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// fetchGit clones the repository at ref into the workspace and returns the
// commit it resolved to. A branch or tag is cloned shallow; a commit SHA
// needs the history to find it.
func fetchGit(ctx context.Context, s v1alpha1.GitSource, env Env) (Fetched, error) {
	auth, err := gitAuth(env.SourceAuthDir, s.URL)
	if err != nil {
		return Fetched{}, err
	}
	dir, err := srcDir(env, "git")
	if err != nil {
		return Fetched{}, err
	}
	ref := firstOf(s.Ref, "main")
	var repo *git.Repository
	if regexpSHA.MatchString(ref) {
		repo, err = git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{URL: s.URL, Auth: auth, NoCheckout: true})
		if err == nil {
			var wt *git.Worktree
			if wt, err = repo.Worktree(); err == nil {
				err = wt.Checkout(&git.CheckoutOptions{Hash: plumbing.NewHash(ref), Force: true})
			}
		}
	} else {
		// Try ref as a branch, then as a tag.
		for _, name := range []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)} {
			if err = os.RemoveAll(dir); err != nil {
				break
			}
			repo, err = git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{
				URL: s.URL, Auth: auth, ReferenceName: name, SingleBranch: true, Depth: 1, Tags: git.NoTags,
			})
			if !isRefNotFound(err) {
				break
			}
		}
	}
	if err != nil {
		return Fetched{}, gitError(s.URL, ref, err)
	}
	head, err := repo.Head()
	if err != nil {
		return Fetched{}, gitError(s.URL, ref, err)
	}
	commit, err := repo.CommitObject(head.Hash())
	if err != nil {
		return Fetched{}, gitError(s.URL, ref, err)
	}
	when := commit.Committer.When
	if err := settle(dir, when); err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, fmt.Errorf("git checkout: %w", err))
	}
	// The path is resolved, symlinks included, and must stay in the clone:
	// a symlinked parent folder could otherwise lead to the pod's mounted
	// credentials.
	root, err := dirIn(dir, firstOf(s.Path, "."))
	switch {
	case errors.Is(err, errLeaves):
		return Fetched{}, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("git path %q leaves the repository", s.Path))
	case err != nil:
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("git path %q is not a folder at %s", s.Path, head.Hash()))
	}
	name := strings.TrimSuffix(path.Base(s.URL), ".git")
	return Fetched{Root: root, Revision: head.Hash().String(), Name: name, URL: publicURL(s.URL), Time: when,
		FileIDs: gitBlobIDs(commit, s.Path)}, nil
}

// gitBlobIDs names each regular file under sub (the source's path) by its
// blob id, read from the commit's trees without opening a file: a new
// commit leaves the id of every file it did not change, so their layers
// are not sent again (see push.layerKey). The checkout is the blobs
// themselves (go-git applies no filters), so the id names what is packed.
// A path that only resolves through a symbolic link gets no ids, and its
// layers are hashed while uploaded, as before.
func gitBlobIDs(commit *object.Commit, sub string) map[string]string {
	tree, err := commit.Tree()
	if err != nil {
		return nil
	}
	if sub = strings.TrimPrefix(path.Clean("/"+sub), "/"); sub != "" {
		if tree, err = tree.Tree(sub); err != nil {
			return nil
		}
	}
	ids := map[string]string{}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			return ids
		}
		if err != nil {
			return nil
		}
		// Links and submodules are never packed (see pack.Walk).
		if e.Mode == filemode.Regular || e.Mode == filemode.Executable {
			ids[name] = "gitblob:" + e.Hash.String()
		}
	}
}

func isRefNotFound(err error) bool {
	var nf git.NoMatchingRefSpecError
	return err != nil && (errors.As(err, &nf) || errors.Is(err, plumbing.ErrReferenceNotFound) ||
		strings.Contains(err.Error(), "couldn't find remote ref"))
}

func gitError(url, ref string, err error) error {
	err = fmt.Errorf("git %s@%s: %w", url, ref, err)
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return failure.Permanent(workerv1.ReasonSourceAuth, err)
	case errors.Is(err, transport.ErrRepositoryNotFound), isRefNotFound(err), errors.Is(err, plumbing.ErrObjectNotFound):
		return failure.Permanent(workerv1.ReasonSourceNotFound, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return failure.Retryable(workerv1.ReasonSourceFailed, err)
}

// gitAuth reads the Secret's files (see package gitauth, shared with the
// Claim render's private templates).
func gitAuth(dir, url string) (transport.AuthMethod, error) {
	return gitauth.Load(dir, url, workerv1.ReasonSourceAuth)
}
