package push

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/file"
	"oras.land/oras-go/v2/content/oci"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/benchenv"
	"github.com/packline/packline/test/regtest"
)

// BenchmarkPush compares, against the real registry and in the same run:
//
//	a: our pack+push (tar streamed into the upload, one read of each file);
//	b: baseline, raw oras-go push of the same files as blobs, no tar
//	   (oras' file store: hash each file, then upload it);
//	c: two passes like the kit CLI: tar each layer into a local OCI layout
//	   on disk, then oras.Copy the layout to the registry;
//	d: our re-push of unchanged content (digest cache + HEAD checks);
//	e: kit's push step alone, replayed: the same layers, packed and hashed
//	   beforehand into a local OCI layout (untimed), then oras.Copy to the
//	   registry with concurrency 5, as `kit push` does (pkg/cmd/push). This
//	   is the target for a: what is left to pay once packing is free.
//
// Size: PACKLINE_BENCH_BYTES (default 1 GiB) in 8 files. Run with
// -benchtime=1x; every approach pushes to its own fresh repository.
func BenchmarkPush(b *testing.B) {
	total := benchenv.Bytes(b, 1<<30)
	root := b.TempDir()
	genModel(b, root, total, 8)
	host := regtest.Start(b)
	ctx := context.Background()

	var ta, tb, tc, td, te time.Duration
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
		layout := prePack(ctx, b, root)
		te += timed(b, func() error { return kitPush(ctx, b, layout, host, repo("e")) })
	}
	mb := float64(total) * float64(b.N) / (1 << 20)
	rate := func(d time.Duration) float64 { return mb / d.Seconds() }
	b.ReportMetric(rate(ta), "a_MB/s")
	b.ReportMetric(rate(tb), "b_MB/s")
	b.ReportMetric(rate(tc), "c_MB/s")
	b.ReportMetric(rate(ta)/rate(tb), "a/b_throughput")
	b.ReportMetric(tc.Seconds()/ta.Seconds(), "c/a_time")
	b.ReportMetric(td.Seconds()/ta.Seconds(), "d/a_time")
	b.ReportMetric(rate(te), "e_MB/s")
	b.ReportMetric(rate(ta)/rate(te), "a/e_throughput")
	b.Logf("%.0f MiB: a ours %.1f MB/s, b oras files %.1f MB/s, c two-pass %.1f MB/s, d re-push %s, e kit push of pre-packed layers %.1f MB/s; a/b=%.2f (target ≥0.9) c/a time=%.2f (target ≥1.5) d/a time=%.3f (target ≤0.05) a/e=%.2f (target ≥0.9: pack+push at kit's push-alone speed)",
		mb, rate(ta), rate(tb), rate(tc), td/time.Duration(b.N), rate(te), rate(ta)/rate(tb), tc.Seconds()/ta.Seconds(), td.Seconds()/ta.Seconds(), rate(ta)/rate(te))
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

// prePack writes the ModelKit of root into a fresh OCI layout, as `kit
// pack` leaves it in local storage: every layer tarred, hashed and stored.
func prePack(ctx context.Context, b *testing.B, root string) string {
	dir := b.TempDir()
	if err := packLayout(ctx, dir, root, generated(b, root)); err != nil {
		b.Fatal(err)
	}
	return dir
}

// kitPush is e: `kit push`'s PushModel, oras.Copy from local storage with
// kit's default --concurrency 5, through an HTTP client like kit's (a clone
// of Go's default transport), not ours.
func kitPush(ctx context.Context, b *testing.B, layout, host, name string) error {
	store, err := oci.New(layout)
	if err != nil {
		return err
	}
	ref, err := orasregistry.ParseReference(host + "/" + name)
	if err != nil {
		return err
	}
	dst := &remote.Repository{Reference: ref, PlainHTTP: true, Client: &auth.Client{
		Client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
	}}
	opts := oras.CopyOptions{}
	opts.Concurrency = 5
	_, err = oras.Copy(ctx, store, "v1", dst, "v1", opts)
	return err
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
	if err := packLayout(ctx, dir, root, generated(b, root)); err != nil {
		return err
	}
	store, err := oci.New(dir)
	if err != nil {
		return err
	}
	_, err = oras.Copy(ctx, store, "v1", repoAt(b, host, name, registry.Options{}), "v1", oras.DefaultCopyOptions)
	return err
}

// packLayout tars every layer of kf into the OCI layout at dir (hashing as
// it writes, as kit does) and tags the manifest v1.
func packLayout(ctx context.Context, dir, root string, kf *kitfile.Kitfile) error {
	store, err := oci.New(dir)
	if err != nil {
		return err
	}
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
	return store.Tag(ctx, mdesc, "v1")
}

// BenchmarkPushConcurrency is the profile of our push against kit's push
// of pre-packed layers (e, above), at 1, 2, 3 and 5 layers at once. Wall
// time on a shared 2-core machine swings with the neighbours' load, so
// approaches are interleaved for PACKLINE_BENCH_ROUNDS rounds (default 3)
// and medians reported, and so is what load does not move: CPU seconds
// per GiB in this process (client) and in the registry (its ingest: hash
// and disk write). Size: PACKLINE_BENCH_BYTES (default 256 MiB), 8 files.
//
// p is our push at concurrency 5 of layers hashed while their files were
// downloaded (a Hub import, pack.Prehash): its Complete reads each file
// into the tee as the download would, and that time and CPU are the
// download's, so they are taken off, as kit's pack is off e's clock.
func BenchmarkPushConcurrency(b *testing.B) {
	total, rounds := envInt(b, "PACKLINE_BENCH_BYTES", 256<<20), int(envInt(b, "PACKLINE_BENCH_ROUNDS", 3))
	root := b.TempDir()
	genModel(b, root, total, 8)
	reg := regtest.StartWith(b, regtest.Options{})
	host := reg.Host
	ctx := context.Background()
	layout := prePack(ctx, b, root)
	gib := float64(total) / (1 << 30)
	levels := []int{1, 2, 3, 5}
	runs := map[int][]cost{} // 0 is e, -1 is p
	n := 0
	for range b.N {
		for range rounds {
			n++
			runs[0] = append(runs[0], measure(b, reg, func() error { return kitPush(ctx, b, layout, host, fmt.Sprintf("conc/kit-%d", n)) }))
			for _, c := range levels {
				runs[c] = append(runs[c], measure(b, reg, func() error {
					_, _, err := Push(ctx, repoAt(b, host, fmt.Sprintf("conc/a%d-%d", c, n), registry.Options{}), root, generated(b, root), Options{Tag: "v1", Concurrency: c})
					return err
				}))
			}
			var download cost
			p := measure(b, reg, func() error {
				_, st, err := Push(ctx, repoAt(b, host, fmt.Sprintf("conc/p-%d", n), registry.Options{}), root, generated(b, root), Options{Tag: "v1", Concurrency: 5,
					Complete: func(_ context.Context, names []string, tee func(string) io.Writer) error {
						download = measure(b, reg, func() error { return teeFiles(root, names, tee) })
						return nil
					}})
				if err == nil && st.Prehashed != 8 {
					err = fmt.Errorf("%d of the 8 shards' layers prehashed", st.Prehashed)
				}
				return err
			})
			runs[-1] = append(runs[-1], cost{wall: p.wall - download.wall, client: p.client - download.client, registry: p.registry - download.registry})
		}
	}
	e := medianCost(runs[0])
	b.Logf("e kit push of pre-packed layers: %.1f MB/s; CPU s/GiB client %.2f, registry %.2f (medians of %d)",
		float64(total)/(1<<20)/e.wall.Seconds(), e.client.Seconds()/gib, e.registry.Seconds()/gib, len(runs[0]))
	for _, c := range levels {
		a := medianCost(runs[c])
		b.ReportMetric(e.wall.Seconds()/a.wall.Seconds(), fmt.Sprintf("a%d/e_throughput", c))
		b.Logf("a concurrency %d: %.1f MB/s, %.2f× kit push's throughput; CPU s/GiB client %.2f, registry %.2f",
			c, float64(total)/(1<<20)/a.wall.Seconds(), e.wall.Seconds()/a.wall.Seconds(), a.client.Seconds()/gib, a.registry.Seconds()/gib)
	}
	p := medianCost(runs[-1])
	b.ReportMetric(e.wall.Seconds()/p.wall.Seconds(), "p5/e_throughput")
	b.Logf("p concurrency 5, hashed while downloaded: %.1f MB/s, %.2f× kit push's throughput; CPU s/GiB client %.2f, registry %.2f",
		float64(total)/(1<<20)/p.wall.Seconds(), e.wall.Seconds()/p.wall.Seconds(), p.client.Seconds()/gib, p.registry.Seconds()/gib)
}

// teeFiles writes each named file to its tee, as a download writes what
// it receives.
func teeFiles(root string, names []string, tee func(string) io.Writer) error {
	buf := make([]byte, 1<<20)
	for _, name := range names {
		w := tee(name)
		if w == nil {
			continue
		}
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		// Without its WriterTo, so that the copy goes by buf.
		_, err = io.CopyBuffer(w, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// cost is one push's wall time and the CPU it took on each side.
type cost struct{ wall, client, registry time.Duration }

func measure(b *testing.B, reg *regtest.Registry, f func() error) cost {
	c0, r0 := selfCPU(), reg.CPU()
	wall := timed(b, f)
	return cost{wall: wall, client: selfCPU() - c0, registry: reg.CPU() - r0}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// medianCost takes each field's median on its own.
func medianCost(cs []cost) cost {
	pick := func(f func(cost) time.Duration) time.Duration {
		var d []time.Duration
		for _, c := range cs {
			d = append(d, f(c))
		}
		return median(d)
	}
	return cost{
		wall:     pick(func(c cost) time.Duration { return c.wall }),
		client:   pick(func(c cost) time.Duration { return c.client }),
		registry: pick(func(c cost) time.Duration { return c.registry }),
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func envInt(b *testing.B, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return n
}
