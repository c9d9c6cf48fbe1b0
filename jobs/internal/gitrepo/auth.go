// LoadAuth reads Git credentials from a mounted Secret: the keys
// "token", or "username" and "password", for HTTP(S); "ssh-privatekey" and
// "known_hosts" (and an optional "username", and "password" as the key's
// passphrase) for SSH. An Artifact's Git source and a private ClaimTemplate
// read the same keys, so both use this one loader.
//
// The values stay in memory: they are never logged or put into an error.
// Where they go is go-git's business, and go-git sends them only to the
// repository's origin: its HTTP transport strips credentials from a
// redirect that leaves the origin (scheme, host and port; only http to
// https on the default ports may upgrade) and drops them from the session,
// and follows redirects only on the first request (see auth_test.go,
// which holds that behaviour in place against a redirect to another host).

package gitrepo

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

// LoadAuth reads the credential for url from dir. A missing or empty dir, or
// one without any credential key for url's scheme, means anonymous access
// (nil, nil). Unusable credentials (an unreadable file, a key that does not
// parse, an SSH key without known_hosts) are a permanent failure with
// reason; what names the Secret is the caller's hint.
func LoadAuth(dir, url, reason string) (transport.AuthMethod, error) {
	if dir == "" {
		return nil, nil
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		if err != nil {
			return "", failure.Permanent(reason, fmt.Errorf("reading Git credential %q: %w", name, err))
		}
		// Secrets created with `echo` carry a trailing newline.
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	var keys [5]string
	for i, name := range []string{"username", "password", "token", "ssh-privatekey", "known_hosts"} {
		v, err := read(name)
		if err != nil {
			return nil, err
		}
		keys[i] = v
	}
	user, pass, token, key := keys[0], keys[1], keys[2], keys[3]

	if strings.HasPrefix(url, "ssh://") {
		if key == "" {
			return nil, nil
		}
		if user == "" {
			user = "git"
		}
		pk, err := gitssh.NewPublicKeys(user, []byte(key), pass)
		if err != nil {
			// The parse error is not quoted: it is about the key.
			return nil, failure.Permanent(reason, errors.New("the Secret's ssh-privatekey is not a usable private key (or its passphrase, the password key, is wrong)"))
		}
		known := filepath.Join(dir, "known_hosts")
		if keys[4] == "" {
			// Trusting any host key would let a man in the middle take the
			// key's signature and serve the repository; refuse instead.
			return nil, failure.Permanent(reason, errors.New("the Secret has ssh-privatekey but no known_hosts: add the server's host keys"))
		}
		cb, err := gitssh.NewKnownHostsCallback(known)
		if err != nil {
			return nil, failure.Permanent(reason, fmt.Errorf("the Secret's known_hosts: %w", err))
		}
		pk.HostKeyCallback = cb
		return pk, nil
	}
	switch {
	case token != "":
		if user == "" {
			// Git hosts accept a token as the password of any user name.
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: token}, nil
	case user != "" || pass != "":
		return &githttp.BasicAuth{Username: user, Password: pass}, nil
	}
	return nil, nil
}
