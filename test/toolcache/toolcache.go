// Package toolcache finds what the scripts in test/tools build into the
// cache folder outside the clone (the registry, cosign, Flux, the
// Kubernetes binaries): from an environment variable the Makefile sets,
// else by running the script once per process, which builds on first use
// and afterwards only prints the cached path.
package toolcache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

var (
	mu    sync.Mutex
	found = map[string]result{}
)

type result struct {
	path string
	err  error
}

// Path returns $env when set, else the last line test/tools/<script>
// prints, giving the build up to timeout.
func Path(env, script string, timeout time.Duration) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if r, ok := found[script]; ok {
		return r.path, r.err
	}
	p, err := run(script, timeout)
	found[script] = result{p, err}
	return p, err
}

func run(script string, timeout time.Duration) (string, error) {
	root := RepoRoot()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "test", "tools", script))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("test/tools/%s: %v\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// RepoRoot is the repository's top folder (this file's, two levels up).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
