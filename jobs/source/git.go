package source

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/internal/gitrepo"
)

// fetchGit checks the repository out at ref into the workspace (see
// gitrepo.Clone for what a ref names) and returns the commit it resolved
// to.
func fetchGit(ctx context.Context, s v1alpha1.GitSource, env Env) (Fetched, error) {
	auth, err := gitAuth(env.SourceAuthDir, s.URL)
	if err != nil {
		return Fetched{}, err
	}
	dir, err := srcDir(env, "git")
	if err != nil {
		return Fetched{}, err
	}
	c, err := gitrepo.Clone(ctx, gitrepo.Options{URL: s.URL, Ref: s.Ref, Dir: dir, Auth: auth, Checkout: true})
	if err != nil {
		return Fetched{}, err
	}
	when := c.Commit.Committer.When
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
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("git path %q is not a folder at %s", s.Path, c.Commit.Hash))
	}
	name := strings.TrimSuffix(path.Base(s.URL), ".git")
	return Fetched{Root: root, Revision: c.Commit.Hash.String(), Name: name, URL: redact.Public(s.URL), Time: when,
		FileIDs: gitrepo.BlobIDs(c.Commit, s.Path)}, nil
}

// gitAuth reads the Secret's files (see gitrepo.LoadAuth, shared with the
// Claim render's private templates).
func gitAuth(dir, url string) (transport.AuthMethod, error) {
	return gitrepo.LoadAuth(dir, url, workerv1.ReasonSourceAuth)
}
