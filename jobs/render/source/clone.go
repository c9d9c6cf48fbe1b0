// Package source fetches a template repository at a branch, tag or commit
// SHA (see package gitrepo, which an Artifact's Git source shares), and
// reads the resolved commit's tree into memory, so that rendering never
// touches the worker's filesystem outside that snapshot.
package source

import (
	"context"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/packline/packline/jobs/internal/gitrepo"
)

// Options says what to fetch and where.
type Options struct {
	URL string
	// Ref is a branch, a tag, a full ref name or a commit SHA; empty means main.
	Ref string
	// Dir is where the bare clone is written; it is emptied first, because a
	// retry reuses the workspace of the failed attempt.
	Dir string
	// Auth is the repository's credential (see gitrepo.LoadAuth); nil
	// clones anonymously.
	Auth transport.AuthMethod
	// Limits bound what is read from the tree; zero fields take defaults.
	Limits Limits
}

// Revision is the resolved commit.
type Revision struct {
	// Ref is the ref that was asked for, as given (defaulted to main).
	Ref string
	// Commit is the full commit SHA.
	Commit string
	// Time is the committer time, the artifact's creation time.
	Time time.Time
	// IsSHA reports that Ref was a commit SHA rather than a branch or tag.
	IsSHA bool
}

// Fetch clones the repository bare and returns the commit and its tree.
func Fetch(ctx context.Context, o Options) (Revision, *Snapshot, error) {
	c, err := gitrepo.Clone(ctx, gitrepo.Options{URL: o.URL, Ref: o.Ref, Dir: o.Dir, Auth: o.Auth})
	if err != nil {
		return Revision{}, nil, err
	}
	snap, err := readTree(c.Commit, o.Limits)
	if err != nil {
		return Revision{}, nil, err
	}
	return Revision{Ref: c.Ref, Commit: c.Commit.Hash.String(), Time: c.Commit.Committer.When.UTC(), IsSHA: c.IsSHA}, snap, nil
}
