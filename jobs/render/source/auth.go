package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/packline/packline/jobs/failure"
)

// Auth reads Git credentials from dir, the mounted source Secret (keys as
// files: username, password, token, ssh-privatekey, known_hosts). A missing
// dir or an empty one means anonymous access. The values stay in memory and
// are never logged or put into errors.
func Auth(dir, url string) (transport.AuthMethod, error) {
	if dir == "" {
		return nil, nil
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", failure.Permanent(failure.ReasonSourceAuth, fmt.Errorf("reading source credential %q: %w", name, err))
		}
		// Secrets created with `echo` carry a trailing newline.
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if strings.HasPrefix(url, "ssh://") {
		key, err := read("ssh-privatekey")
		if err != nil || key == "" {
			return nil, err
		}
		pk, err := gitssh.NewPublicKeys("git", []byte(key), "")
		if err != nil {
			return nil, failure.Permanent(failure.ReasonSourceAuth, errors.New("source secret's ssh-privatekey is not a usable private key"))
		}
		known := filepath.Join(dir, "known_hosts")
		if _, err := os.Stat(known); err != nil {
			// Trusting any host key would let a man in the middle serve the
			// template; refuse instead of falling back.
			return nil, failure.Permanent(failure.ReasonSourceAuth, errors.New("source secret has ssh-privatekey but no known_hosts"))
		}
		cb, err := gitssh.NewKnownHostsCallback(known)
		if err != nil {
			return nil, failure.Permanent(failure.ReasonSourceAuth, fmt.Errorf("source secret's known_hosts: %w", err))
		}
		pk.HostKeyCallback = cb
		return pk, nil
	}
	user, err := read("username")
	if err != nil {
		return nil, err
	}
	pass, err := read("password")
	if err != nil {
		return nil, err
	}
	token, err := read("token")
	if err != nil {
		return nil, err
	}
	switch {
	case token != "":
		if user == "" {
			// Git hosts accept any non-empty user name with a token.
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: token}, nil
	case user != "" || pass != "":
		return &githttp.BasicAuth{Username: user, Password: pass}, nil
	}
	return nil, nil
}
