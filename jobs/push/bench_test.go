package push

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/file"
	"oras.land/oras-go/v2/content/oci"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/pack"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

// BenchmarkPush compares, against the real registry and in the same run:
//
//	a: our pack+push (tar streamed into the upload, one read of each file);
//	b: baseline, raw oras-go push of the same files as blobs, no tar
//	   (oras' file store: hash each file, then upload it);
//	c: two passes like the kit CLI: tar each layer into a local OCI layout
//	   on disk, then oras.Copy the layout to the registry;
//	d: our re-push of unchanged content (digest cache + HEAD checks).
//
// Size: PACKLINE_BENCH_BYTES (default 1 GiB) in 8 files. Run with
// -benchtime=1x; every approach pushes to its own fresh repository.
func BenchmarkPush(b *testing.B) {
	total := int64(1 << 30)
	if s := os.Getenv("PACKLINE_BENCH_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		total = n
	}
	root := b.TempDir()
	genModel(b, root, total, 8)
	host := regtest.Start(b)
	ctx := context.Background()

	var ta, tb, tc, td time.Duration
	for i := range b.N {
		repo := func(kind string) string { return fmt.Sprintf("bench/%s-%d", kind, i) }
		cacheDir := b.TempDir()

		ta += timed(b, func() error {
			_, _, err := Push(ctx, repoAt(b, host, repo("a"), registry.Options{}), root, generated(b, root), Options{Tag: "v1", CacheDir: cacheDir})
			return err
		})
		tb += timed(b, func() error { return orasFiles(ctx, b, host, repo("b"), root) })
		tc += timed(b, func() error { return twoPass(ctx, b, host, repo("c"), root) })
		td += timed(b, func() error {
			_, st, err := Push(ctx, repoAt(b, host, repo("a"), registry.Options{}), root, generated(b, root), Options{Tag: "v1", CacheDir: cacheDir})
			if err == nil && st.Uploaded != 0 {
				err = fmt.Errorf("re-push uploaded %d layers", st.Uploaded)
			}
			return err
		})
	}
	mb := float64(total) * float64(b.N) / (1 << 20)
	rate := func(d time.Duration) float64 { return mb / d.Seconds() }
	b.ReportMetric(rate(ta), "a_MB/s")
	b.ReportMetric(rate(tb), "b_MB/s")
	b.ReportMetric(rate(tc), "c_MB/s")
	b.ReportMetric(rate(ta)/rate(tb), "a/b_throughput")
	b.ReportMetric(tc.Seconds()/ta.Seconds(), "c/a_time")
	b.ReportMetric(td.Seconds()/ta.Seconds(), "d/a_time")
	b.Logf("%.0f MiB: a ours %.1f MB/s, b oras files %.1f MB/s, c two-pass %.1f MB/s, d re-push %s; a/b=%.2f (target ≥0.9) c/a time=%.2f (target ≥1.5) d/a time=%.3f (target ≤0.05)",
		mb, rate(ta), rate(tb), rate(tc), td/time.Duration(b.N), rate(ta)/rate(tb), tc.Seconds()/ta.Seconds(), td.Seconds()/ta.Seconds())
}

func timed(b *testing.B, f func() error) time.Duration {
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// genModel writes n shards of incompressible data totalling size bytes.
func genModel(b *testing.B, root string, size int64, n int) {
	block := make([]byte, 1<<20)
	per := size / int64(n)
	for i := range n {
		f, err := os.Create(filepath.Join(root, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)))
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < per; off += int64(len(block)) {
			// Fresh random bytes per block: weights do not compress, not
			// even across blocks (zstd's window would find repeats).
			if _, err := rand.Read(block); err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(block[:min(int64(len(block)), per-off)]); err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
	os.WriteFile(filepath.Join(root, "config.json"), []byte(`{"model_type":"bench"}`), 0o644)
}

// orasFiles is b: what `oras push` does with oras-go's file store.
func orasFiles(ctx context.Context, b *testing.B, host, name, root string) error {
	fs, err := file.New(root)
	if err != nil {
		return err
	}
	defer fs.Close()
	files, err := kitfile.List(root)
	if err != nil {
		return err
	}
	var layers []ocispec.Descriptor
	for _, f := range files {
		d, err := fs.Add(ctx, f.Path, "application/octet-stream", "")
		if err != nil {
			return err
		}
		layers = append(layers, d)
	}
	m, err := oras.PackManifest(ctx, fs, oras.PackManifestVersion1_1, "application/vnd.test", oras.PackManifestOptions{Layers: layers})
	if err != nil {
		return err
	}
	if err := fs.Tag(ctx, m, "v1"); err != nil {
		return err
	}
	_, err = oras.Copy(ctx, fs, "v1", repoAt(b, host, name, registry.Options{}), "v1", oras.DefaultCopyOptions)
	return err
}

// twoPass is c: tar every layer into an OCI layout on disk (hashing as it
// writes, as kit does), then copy the layout to the registry.
func twoPass(ctx context.Context, b *testing.B, host, name, root string) error {
	dir := b.TempDir()
	store, err := oci.New(dir)
	if err != nil {
		return err
	}
	kf := generated(b, root)
	var layers []ocispec.Descriptor
	for _, e := range kf.Entries() {
		items, err := pack.Walk(root, e.Path, kf.Paths())
		if err != nil {
			return err
		}
		tmp, err := os.CreateTemp(dir, "layer-")
		if err != nil {
			return err
		}
		h := digest.Canonical.Digester()
		cw := &counter{}
		if _, err := pack.Write(io.MultiWriter(tmp, h.Hash(), cw), items, v1alpha1.CompressionNone); err != nil {
			return err
		}
		tmp.Close()
		desc := ocispec.Descriptor{MediaType: format.LayerMediaType(v1alpha1.FormatModelKit, e.Kind, v1alpha1.CompressionNone), Digest: h.Digest(), Size: cw.n}
		// Move, not copy, into the layout: kit renames its temp file too.
		blob := filepath.Join(dir, "blobs", "sha256", desc.Digest.Encoded())
		os.MkdirAll(filepath.Dir(blob), 0o755)
		if err := os.Rename(tmp.Name(), blob); err != nil {
			return err
		}
		*e.Info = &kitfile.LayerInfo{Digest: desc.Digest.String(), DiffID: desc.Digest.String()}
		layers = append(layers, desc)
	}
	cfg, _ := json.Marshal(kf)
	cdesc := ocispec.Descriptor{MediaType: format.KitConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))}
	if err := store.Push(ctx, cdesc, bytes.NewReader(cfg)); err != nil {
		return err
	}
	mb, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: format.KitArtifactType, Config: cdesc, Layers: layers})
	mdesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mb), Size: int64(len(mb))}
	if err := store.Push(ctx, mdesc, bytes.NewReader(mb)); err != nil {
		return err
	}
	if err := store.Tag(ctx, mdesc, "v1"); err != nil {
		return err
	}
	_, err = oras.Copy(ctx, store, "v1", repoAt(b, host, name, registry.Options{}), "v1", oras.DefaultCopyOptions)
	return err
}
