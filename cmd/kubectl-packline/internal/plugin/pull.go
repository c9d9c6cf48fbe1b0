package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/jobs/format"
	jobsregistry "github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/jobs/source"
)

// maxManifestBytes bounds the manifest read into memory.
const maxManifestBytes = 4 << 20

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

// Pull fetches manifest d from repo, verifies it and its config, and
// unpacks each layer into dir, verifying each layer's digest as it
// streams. It returns the number of layers.
func Pull(ctx context.Context, repo *remote.Repository, d digest.Digest, dir string, progress io.Writer) (int, error) {
	desc, err := repo.Resolve(ctx, d.String())
	if err != nil {
		return 0, fmt.Errorf("resolving %s: %w", d, err)
	}
	if desc.Digest != d {
		return 0, fmt.Errorf("the registry answered %s for %s", desc.Digest, d)
	}
	if desc.Size > maxManifestBytes {
		return 0, fmt.Errorf("manifest %s is %d bytes, more than %d", d, desc.Size, maxManifestBytes)
	}
	mb, err := content.FetchAll(ctx, repo, desc) // verifies size and digest
	if err != nil {
		return 0, fmt.Errorf("fetching manifest %s: %w", d, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil || desc.MediaType != ocispec.MediaTypeImageManifest {
		return 0, fmt.Errorf("%s is a %s, not an OCI image manifest", d, desc.MediaType)
	}
	if m.Config.Size > maxManifestBytes {
		return 0, fmt.Errorf("config %s is %d bytes, more than %d", m.Config.Digest, m.Config.Size, maxManifestBytes)
	}
	if _, err := content.FetchAll(ctx, repo, m.Config); err != nil {
		return 0, fmt.Errorf("fetching config %s: %w", m.Config.Digest, err)
	}
	var total int64
	for _, l := range m.Layers {
		total += l.Size
	}
	bar := &progressBar{w: progress, total: total, layers: len(m.Layers)}
	for i, l := range m.Layers {
		bar.layer = i + 1
		if err := pullLayer(ctx, repo, l, dir, bar); err != nil {
			bar.end()
			return 0, fmt.Errorf("layer %d/%d %s (%s): %w", i+1, len(m.Layers), l.Digest, l.MediaType, err)
		}
	}
	bar.end()
	return len(m.Layers), nil
}

// pullLayer streams one blob through a digest check into the unpacker;
// the check runs after the stream is read to its end, and a mismatch fails
// the pull (whose caller then empties dir).
func pullLayer(ctx context.Context, repo *remote.Repository, l ocispec.Descriptor, dir string, bar *progressBar) error {
	rc, err := repo.Fetch(ctx, l)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr := content.NewVerifyReader(rc, l)
	r := io.Reader(&countingReader{r: vr, bar: bar})
	unpackErr := unpack(r, l, dir)
	// Read to the end either way: bytes that do not match the digest are
	// the cause to report, even when they also broke the unpacking.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	if err := vr.Verify(); err != nil {
		if unpackErr != nil {
			return fmt.Errorf("digest check failed: %w (the bytes also failed to unpack: %v)", err, unpackErr)
		}
		return fmt.Errorf("digest check failed: %w", err)
	}
	return unpackErr
}

// unpack writes one layer: tar layers (plain, gzip or zstd) are unpacked
// with the worker's own contained extractor (jobs/source), keeping file
// modes; any other blob is written as the one file its title or
// model-spec filepath annotation names.
func unpack(r io.Reader, l ocispec.Descriptor, dir string) error {
	mt := l.MediaType
	switch {
	case strings.HasSuffix(mt, ".tar+gzip") || strings.HasSuffix(mt, ".tar.gzip") || mt == ocispec.MediaTypeImageLayerGzip:
		return source.ExtractTar(r, true, dir, source.Limits{})
	case strings.HasSuffix(mt, ".tar+zstd") || mt == ocispec.MediaTypeImageLayerZstd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			return err
		}
		defer zr.Close()
		return source.ExtractTar(zr, false, dir, source.Limits{})
	case strings.HasSuffix(mt, ".tar") || mt == ocispec.MediaTypeImageLayer:
		return source.ExtractTar(r, false, dir, source.Limits{})
	}
	name := l.Annotations[ocispec.AnnotationTitle]
	if name == "" {
		name = l.Annotations[format.AnnotationFilepath]
	}
	if name == "" {
		name = strings.Replace(l.Digest.String(), ":", "-", 1)
	}
	c := path.Clean(strings.ReplaceAll(name, `\`, "/"))
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("layer file name %q leaves the folder", name)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if p := path.Dir(c); p != "." {
		if err := root.MkdirAll(filepath.FromSlash(p), 0o755); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(filepath.FromSlash(c), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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

type countingReader struct {
	r   io.Reader
	bar *progressBar
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.bar.add(int64(n))
	return n, err
}

func (b *progressBar) add(n int64) {
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
