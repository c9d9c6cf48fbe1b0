package push

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/file"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/benchenv"
	"github.com/packline/packline/test/regtest"
)

// BenchmarkCompression compares, for gzip and zstd, against the real
// registry and in the same run:
//
//	ours: pack+push with the compression (tar, compress, hash and upload
//	      in one streamed pass);
//	raw:  oras-go pushing the very same compressed layer bytes, made
//	      beforehand and untimed, from its file store (hash, then upload).
//
// raw is the floor for the upload alone; ours/raw shows what compressing
// on the fly costs. Throughput is of the uncompressed model bytes.
// Size: PACKLINE_BENCH_BYTES (default 1 GiB) in 8 incompressible shards,
// as weights are. Run with -benchtime=1x.
func BenchmarkCompression(b *testing.B) {
	total := benchenv.Bytes(b, 1<<30)
	root := b.TempDir()
	genModel(b, root, total, 8)
	host := regtest.Start(b)
	ctx := context.Background()
	mb := float64(total) / (1 << 20)
	for _, c := range []v1alpha1.Compression{v1alpha1.CompressionGzip, v1alpha1.CompressionZstd} {
		var ours, raw time.Duration
		var compressed int64
		for i := range b.N {
			ours += timed(b, func() error {
				_, _, err := Push(ctx, repoAt(b, host, fmt.Sprintf("cbench/ours-%s-%d", c, i), registry.Options{}), root, generated(b, root), Options{Compression: c, Tag: "v1"})
				return err
			})
			blobs, n := compressLayers(b, root, c)
			compressed = n
			raw += timed(b, func() error { return orasBlobs(ctx, b, host, fmt.Sprintf("cbench/raw-%s-%d", c, i), blobs) })
		}
		n := float64(b.N)
		rate := func(d time.Duration) float64 { return mb * n / d.Seconds() }
		b.ReportMetric(rate(ours), string(c)+"_ours_MB/s")
		b.ReportMetric(rate(raw), string(c)+"_raw_MB/s")
		b.ReportMetric(rate(ours)/rate(raw), string(c)+"_ours/raw")
		b.Logf("%s, %.0f MiB → %.0f MiB: ours %.1f MB/s, raw oras-go push of the same bytes %.1f MB/s, ours/raw=%.2f",
			c, mb, float64(compressed)/(1<<20), rate(ours), rate(raw), rate(ours)/rate(raw))
	}
}

type blob struct {
	path      string
	mediaType string
}

// compressLayers writes each layer of root, compressed with c, to a file.
func compressLayers(b *testing.B, root string, c v1alpha1.Compression) ([]blob, int64) {
	dir := b.TempDir()
	kf := generated(b, root)
	var out []blob
	var total int64
	for i, e := range kf.Entries() {
		items, err := pack.Walk(root, e.Path, kf.Paths())
		if err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("layer-%d", i))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		cw := &counter{}
		if _, err := pack.Write(io.MultiWriter(f, cw), items, c); err != nil {
			b.Fatal(err)
		}
		f.Close()
		total += cw.n
		out = append(out, blob{p, format.LayerMediaType(v1alpha1.FormatModelKit, e.Kind, c)})
	}
	return out, total
}

// orasBlobs pushes files as layers with oras-go's file store, as `oras push` does.
func orasBlobs(ctx context.Context, b *testing.B, host, name string, blobs []blob) error {
	fs, err := file.New(filepath.Dir(blobs[0].path))
	if err != nil {
		return err
	}
	defer fs.Close()
	var layers []ocispec.Descriptor
	for _, bl := range blobs {
		d, err := fs.Add(ctx, filepath.Base(bl.path), bl.mediaType, bl.path)
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
