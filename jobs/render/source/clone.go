// Package source fetches a template repository with go-git at a branch, tag
// or commit SHA, and reads the resolved commit's tree into memory, so that
// rendering never touches the worker's filesystem outside that snapshot.
package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// Options says what to fetch and where.
type Options struct {
	URL string
	// Ref is a branch, a tag, a full ref name or a commit SHA; empty means main.
	Ref string
	// Dir is where the bare clone is written; it is emptied first, because a
	// retry reuses the workspace of the failed attempt.
	Dir string
	// Auth is the repository's credential (see package gitauth); nil
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

var shaRE = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// Fetch clones the repository and returns the commit and its tree.
func Fetch(ctx context.Context, o Options) (Revision, *Snapshot, error) {
	if o.Ref == "" {
		o.Ref = "main"
	}
	auth := o.Auth
	refs, err := listRefs(ctx, o.URL, auth)
	if err != nil {
		return Revision{}, nil, classify(err, o.URL)
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return Revision{}, nil, fmt.Errorf("clearing clone dir: %w", err)
	}

	rev := Revision{Ref: o.Ref}
	var repo *git.Repository
	if name, ok := matchRef(refs, o.Ref); ok {
		// A branch or tag: a shallow single-ref clone is all we need.
		repo, err = git.PlainCloneContext(ctx, o.Dir, true, &git.CloneOptions{
			URL: o.URL, Auth: auth, ReferenceName: name, SingleBranch: true,
			Depth: 1, Tags: git.NoTags,
		})
		if err != nil {
			return Revision{}, nil, classify(err, o.URL)
		}
		ref, err := repo.Reference(name, true)
		if err != nil {
			return Revision{}, nil, fmt.Errorf("reading cloned ref %s: %w", name, err)
		}
		rev.Commit = ref.Hash().String()
	} else if shaRE.MatchString(o.Ref) {
		// A commit SHA is not advertised; fetch the history and resolve it.
		rev.IsSHA = true
		repo, err = git.PlainCloneContext(ctx, o.Dir, true, &git.CloneOptions{
			URL: o.URL, Auth: auth, Tags: git.NoTags, NoCheckout: true,
		})
		if err != nil {
			return Revision{}, nil, classify(err, o.URL)
		}
		h, err := repo.ResolveRevision(plumbing.Revision(o.Ref))
		if err != nil {
			return Revision{}, nil, failure.Permanent(workerv1.ReasonSourceNotFound,
				fmt.Errorf("commit %s not found in %s", o.Ref, redact(o.URL)))
		}
		rev.Commit = h.String()
	} else {
		return Revision{}, nil, failure.Permanent(workerv1.ReasonSourceNotFound,
			fmt.Errorf("ref %q not found in %s: no such branch or tag", o.Ref, redact(o.URL)))
	}

	commit, err := peelCommit(repo, plumbing.NewHash(rev.Commit))
	if err != nil {
		return Revision{}, nil, err
	}
	rev.Commit = commit.Hash.String()
	rev.Time = commit.Committer.When.UTC()
	snap, err := readTree(commit, o.Limits)
	if err != nil {
		return Revision{}, nil, err
	}
	return rev, snap, nil
}

func listRefs(ctx context.Context, url string, auth transport.AuthMethod) ([]*plumbing.Reference, error) {
	r := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	return r.ListContext(ctx, &git.ListOptions{Auth: auth})
}

// matchRef finds ref the way git does for a short name: exact full name,
// then branch, then tag.
func matchRef(refs []*plumbing.Reference, ref string) (plumbing.ReferenceName, bool) {
	have := map[plumbing.ReferenceName]bool{}
	for _, r := range refs {
		have[r.Name()] = true
	}
	for _, n := range []plumbing.ReferenceName{
		plumbing.ReferenceName(ref),
		plumbing.NewBranchReferenceName(ref),
		plumbing.NewTagReferenceName(ref),
	} {
		if strings.HasPrefix(n.String(), "refs/") && have[n] {
			return n, true
		}
	}
	return "", false
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

// classify sorts Git transport errors into permanent (auth, missing repo,
// empty repo, unknown ref) and retryable (5xx, network) failures.
func classify(err error, url string) error {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return err
	}
	where := redact(url)
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return failure.Permanent(workerv1.ReasonSourceAuth, fmt.Errorf("cloning %s: %w", where, err))
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, transport.ErrEmptyRemoteRepository),
		errors.Is(err, plumbing.ErrReferenceNotFound):
		return failure.Permanent(workerv1.ReasonSourceNotFound, fmt.Errorf("cloning %s: %w", where, err))
	case errors.Is(err, context.Canceled):
		return err
	}
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) {
		if sc, ok := ue.Err.(interface{ StatusCode() int }); ok {
			return failure.HTTPStatus(sc.StatusCode(), fmt.Errorf("cloning %s: %w", where, err))
		}
	}
	// Everything else is the network or the server misbehaving; a later
	// attempt may succeed.
	return failure.Retryable(workerv1.ReasonSourceFailed, fmt.Errorf("cloning %s: %w", where, err))
}

// redact drops user info from a URL so credentials never reach messages.
func redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}

// Redact is redact for callers that record the URL (the artifact's source
// annotation).
func Redact(url string) string { return redact(url) }
