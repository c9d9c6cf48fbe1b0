package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/failure"
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
	// The path is resolved, symlinks included, and must stay in the clone:
	// a symlinked parent folder could otherwise lead to the pod's mounted
	// credentials.
	root, err := dirIn(dir, firstOf(s.Path, "."))
	switch {
	case errors.Is(err, errLeaves):
		return Fetched{}, failure.Permanent(failure.ReasonInvalidSpec, fmt.Errorf("git path %q leaves the repository", s.Path))
	case err != nil:
		return Fetched{}, failure.Permanent(failure.ReasonSourceNotFound, fmt.Errorf("git path %q is not a folder at %s", s.Path, head.Hash()))
	}
	name := strings.TrimSuffix(path.Base(s.URL), ".git")
	return Fetched{Root: root, Revision: head.Hash().String(), Name: name}, nil
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
		return failure.Permanent(failure.ReasonSourceAuth, err)
	case errors.Is(err, transport.ErrRepositoryNotFound), isRefNotFound(err), errors.Is(err, plumbing.ErrObjectNotFound):
		return failure.Permanent(failure.ReasonSourceNotFound, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return failure.Retryable(failure.ReasonSourceFailed, err)
}

// gitAuth reads the Secret's files: token, or username/password, for HTTPS;
// ssh-privatekey (with known_hosts, else any host key is refused) for SSH.
func gitAuth(dir, url string) (transport.AuthMethod, error) {
	if dir == "" {
		return nil, nil
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if strings.HasPrefix(url, "ssh://") {
		key, err := os.ReadFile(filepath.Join(dir, "ssh-privatekey"))
		if err != nil {
			return nil, nil
		}
		user := firstOf(read("username"), "git")
		pk, err := gitssh.NewPublicKeys(user, key, read("password"))
		if err != nil {
			return nil, failure.Permanent(failure.ReasonSourceAuth, fmt.Errorf("ssh-privatekey: %w", err))
		}
		kh := filepath.Join(dir, "known_hosts")
		if _, err := os.Stat(kh); err == nil {
			cb, err := knownhosts.New(kh)
			if err != nil {
				return nil, failure.Permanent(failure.ReasonSourceAuth, fmt.Errorf("known_hosts: %w", err))
			}
			pk.HostKeyCallback = cb
		} else {
			pk.HostKeyCallback = func(string, net.Addr, ssh.PublicKey) error {
				return errors.New("no known_hosts in the source Secret: refusing an unverified host key")
			}
		}
		return pk, nil
	}
	if tok := read("token"); tok != "" {
		// Git hosts accept a token as the password of any user name.
		return &githttp.BasicAuth{Username: firstOf(read("username"), "git"), Password: tok}, nil
	}
	if user, pass := read("username"), read("password"); user != "" || pass != "" {
		return &githttp.BasicAuth{Username: user, Password: pass}, nil
	}
	return nil, nil
}
