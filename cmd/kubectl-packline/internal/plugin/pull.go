package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/jobs/pull"
	jobsregistry "github.com/packline/packline/jobs/registry"
)

// runPull fetches the manifest status names by digest, checks it and
// every blob against their digests, and unpacks the layers into DIR.
func runPull(ctx context.Context, e *env, _ *options, args []string) (int, error) {
	if len(args) != 2 {
		return ExitUsage, usagef("pull takes KIND/NAME DIR")
	}
	kind, name, err := ParseRef(args[0], "Claim", "Artifact")
	if err != nil {
		return ExitUsage, err
	}
	dir := args[1]
	if err := e.connect(); err != nil {
		return ExitFailed, err
	}
	obj, err := e.getPipelineObject(ctx, kind, name)
	if err != nil {
		return ExitFailed, err
	}
	repo, d, err := pushedRepository(kind, obj)
	if err != nil {
		return ExitFailed, err
	}
	if err := emptyDir(dir); err != nil {
		return ExitFailed, err
	}
	n, err := Pull(ctx, repo, d, dir, e.stderr)
	if err != nil {
		// Nothing half-verified stays behind.
		cleanDir(dir)
		return ExitFailed, err
	}
	fmt.Fprintf(e.stdout, "Pulled %s@%s into %s: %d layers, every digest verified\n", repo.Reference.Registry+"/"+repo.Reference.Repository, d, dir, n)
	return ExitOK, nil
}

// pushedRepository is the registry client for obj's status.reference,
// with the spec's plain-HTTP and TLS flags and the user's own registry
// credentials ($DOCKER_CONFIG or ~/.docker/config.json).
func pushedRepository(kind string, obj pipelineObject) (*remote.Repository, digest.Digest, error) {
	st := obj.GetPipelineStatus()
	if st.Reference == "" || st.Digest == "" {
		return nil, "", fmt.Errorf("%s %s has pushed nothing yet (status.reference is empty): see kubectl packline why %s/%s", kind, obj.GetName(), kindNameLower(kind), obj.GetName())
	}
	ref, err := registry.ParseReference(st.Reference)
	if err != nil {
		return nil, "", fmt.Errorf("status.reference %q: %w", st.Reference, err)
	}
	d, err := digest.Parse(st.Digest)
	if err != nil || ref.Reference != d.String() {
		return nil, "", fmt.Errorf("status.reference %q does not name status.digest %q", st.Reference, st.Digest)
	}
	t := obj.GetPushTarget()
	o := jobsregistry.Options{PlainHTTP: t.PlainHTTP, Insecure: t.InsecureSkipTLSVerify, DockerConfigDir: dockerConfigDir()}
	repo, err := jobsregistry.Repository(ref.Registry+"/"+ref.Repository, o)
	if err != nil {
		return nil, "", err
	}
	return repo, d, nil
}

func dockerConfigDir() string {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker")
}

// emptyDir makes dir, or checks it is empty: a pull never mixes with
// what was there.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty: pull into a new or empty folder", dir)
	}
	return nil
}

func cleanDir(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// Pull is jobs/pull.Pull with a progress bar on progress.
func Pull(ctx context.Context, repo *remote.Repository, d digest.Digest, dir string, progress io.Writer) (int, error) {
	bar := &progressBar{w: progress}
	n, err := pull.Pull(ctx, repo, d, dir, bar)
	bar.end()
	return n, err
}

// progressBar draws "[#####     ]  50% 1.0 MiB/2.0 MiB  layer 1/2" on
// one line, at most every 200 ms, and a last line at the end.
type progressBar struct {
	w             io.Writer
	mu            sync.Mutex
	total, done   int64
	layer, layers int
	last          time.Time
}

// Layer is pull.Progress's: the bar is on layer i of n, total bytes in all.
func (b *progressBar) Layer(i, n int, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.layer, b.layers, b.total = i, n, total
}

// Add is pull.Progress's: n more bytes read.
func (b *progressBar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if time.Since(b.last) >= 200*time.Millisecond {
		b.draw("\r")
		b.last = time.Now()
	}
}

func (b *progressBar) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw("\r")
	fmt.Fprintln(b.w)
}

func (b *progressBar) draw(prefix string) {
	pct := int64(100)
	if b.total > 0 {
		pct = b.done * 100 / b.total
	}
	const width = 30
	fill := int(pct * width / 100)
	fmt.Fprintf(b.w, "%s[%s%s] %3d%% %s/%s  layer %d/%d", prefix, strings.Repeat("#", fill), strings.Repeat(" ", width-fill), pct,
		humanBytes(b.done), humanBytes(b.total), b.layer, b.layers)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
