// Package registryconf writes the configuration of the distribution
// registry that the tests (test/regtest) and the sandbox (test/sandbox) run
// on loopback: filesystem storage, deletes enabled (deletionPolicy Delete
// removes manifests), quiet logs, and optional htpasswd users.
package registryconf

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Write writes dir/config.yml for a registry listening on host, storing
// blobs in storage, and returns its path. With users, dir/htpasswd enables
// basic auth under realm.
func Write(dir, storage, host, realm string, users map[string]string) (string, error) {
	var auth string
	if len(users) > 0 {
		names := make([]string, 0, len(users))
		for u := range users {
			names = append(names, u)
		}
		sort.Strings(names)
		var lines []string
		for _, user := range names {
			h, err := bcrypt.GenerateFromPassword([]byte(users[user]), bcrypt.MinCost)
			if err != nil {
				return "", err
			}
			lines = append(lines, user+":"+string(h))
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return "", err
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: %s\n    path: %s\n", realm, htpasswd)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
  secret: %s-not-a-secret
%s`, storage, host, realm, auth)
	path := filepath.Join(dir, "config.yml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}
