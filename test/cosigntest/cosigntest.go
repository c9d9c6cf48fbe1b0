// Package cosigntest runs the real cosign CLI for tests: key pairs made by
// `cosign generate-key-pair`, and `cosign verify` / `verify-attestation`
// against what the worker pushed, offline (a key, no transparency log).
//
// The binary comes from $PACKLINE_COSIGN_BIN, or else from
// test/tools/cosign.sh, which builds it once into a cache folder.
package cosigntest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/packline/packline/test/toolcache"
)

// EnvBinary names the cosign binary to run, skipping the build script.
const EnvBinary = "PACKLINE_COSIGN_BIN"

// Binary returns the cosign binary's path, building it on first use.
func Binary() (string, error) {
	return toolcache.Path(EnvBinary, "cosign.sh", 20*time.Minute)
}

// KeyPair is a key pair written by cosign generate-key-pair.
type KeyPair struct {
	// Dir holds cosign.key (encrypted) and cosign.pub.
	Dir      string
	Password string
}

// Private and Public are the key files' paths.
func (k KeyPair) Private() string { return filepath.Join(k.Dir, "cosign.key") }
func (k KeyPair) Public() string  { return filepath.Join(k.Dir, "cosign.pub") }

// GenerateKeyPair runs `cosign generate-key-pair` with password.
func GenerateKeyPair(t testing.TB, password string) KeyPair {
	t.Helper()
	dir := t.TempDir()
	if out, err := Run(t, dir, []string{"COSIGN_PASSWORD=" + password}, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return KeyPair{Dir: dir, Password: password}
}

// Verify runs `cosign verify` of ref (repo@sha256:… or repo:tag) with the
// public key, offline; it returns the combined output and the exit error.
func Verify(t testing.TB, pub, ref string) (string, error) {
	t.Helper()
	return Run(t, "", nil, "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", ref)
}

// VerifyAttestation runs `cosign verify-attestation --type slsaprovenance1`.
func VerifyAttestation(t testing.TB, pub, ref string) (string, error) {
	t.Helper()
	return Run(t, "", nil, "verify-attestation", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry",
		"--type", "slsaprovenance1", ref)
}

// Run runs cosign with args in dir (a temp folder when empty), with a
// throwaway HOME so nothing is read from or written to the user's
// ~/.sigstore, and no network but the registry's.
func Run(t testing.TB, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("cosigntest: %v", err)
	}
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "TUF_ROOT=" + filepath.Join(home, "tuf"), "PATH=" + os.Getenv("PATH"),
		"COSIGN_YES=true", "SIGSTORE_NO_CACHE=true"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
