// Package regtest runs the real distribution registry (v3) on loopback for
// tests: a temp storage dir, a free port, optional htpasswd auth, and
// Stop/Restart to test a registry that goes away.
//
// The binary comes from $PACKLINE_REGISTRY_BIN, or else from
// test/tools/registry.sh, which builds it once into a cache folder.
package regtest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packline/packline/test/loopback"
	"github.com/packline/packline/test/registryconf"
	"github.com/packline/packline/test/toolcache"
)

// EnvBinary names the registry binary to run, skipping the build script.
const EnvBinary = "PACKLINE_REGISTRY_BIN"

// Options change how the registry runs.
type Options struct {
	// Users enables htpasswd basic auth with these username → password pairs.
	Users map[string]string
}

// Registry is one running registry process.
type Registry struct {
	// Host is "127.0.0.1:<port>"; it stays the same across Restart.
	Host string

	t      testing.TB
	bin    string
	config string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	logs   *bytes.Buffer
}

// Start runs a registry without auth and returns its "host:port".
func Start(t testing.TB) string {
	return StartWith(t, Options{}).Host
}

// StartWith runs a registry with o; it is killed when the test ends.
func StartWith(t testing.TB, o Options) *Registry {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("regtest: %v", err)
	}
	dir := t.TempDir()
	host, err := freeAddr()
	if err != nil {
		t.Fatalf("regtest: %v", err)
	}
	cfg, err := writeConfig(dir, host, o)
	if err != nil {
		t.Fatalf("regtest: %v", err)
	}
	r := &Registry{Host: host, t: t, bin: bin, config: cfg}
	t.Cleanup(r.Stop)
	if err := r.start(); err != nil {
		t.Fatalf("regtest: %v", err)
	}
	return r
}

// Stop kills the registry; the storage is kept for Restart.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// Restart starts a stopped registry again on the same address and storage.
func (r *Registry) Restart() {
	r.t.Helper()
	r.Stop()
	if err := r.start(); err != nil {
		r.t.Fatalf("regtest: %v", err)
	}
}

func (r *Registry) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lastErr error
	// A port found free can be taken before the registry binds it; the
	// registry then exits, and we try again rather than flake.
	for attempt := 0; attempt < 3; attempt++ {
		logs := &bytes.Buffer{}
		cmd := exec.Command(r.bin, "serve", r.config)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", r.bin, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		if err := waitReady(r.Host, done, 30*time.Second); err != nil {
			_ = cmd.Process.Kill()
			<-done
			lastErr = fmt.Errorf("%w; registry output:\n%s", err, logs.String())
			continue
		}
		r.cmd, r.done, r.logs = cmd, done, logs
		return nil
	}
	return lastErr
}

// waitReady polls /v2/ until it answers 200 or 401, the process dies, or the
// deadline passes.
func waitReady(host string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("registry exited before it was ready")
		default:
		}
		resp, err := client.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-exited:
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("registry on %s not ready after %s", host, timeout)
}

// freeAddr is outside the ephemeral port range, so that Restart finds its
// port still free (see loopback.FreePort).
func freeAddr() (string, error) {
	port, err := loopback.FreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

func writeConfig(dir, host string, o Options) (string, error) {
	storage := filepath.Join(dir, "storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return "", err
	}
	return registryconf.Write(dir, storage, host, "regtest", o.Users)
}

// Binary returns the registry binary, building it once per process if needed.
func Binary() (string, error) {
	return toolcache.Path(EnvBinary, "registry.sh", 10*time.Minute)
}

// CPU is the CPU time (user and system) the registry process has used so
// far, from /proc (Linux); benchmarks compare it before and after a push to
// see what the registry's own ingest costs.
func (r *Registry) CPU() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
