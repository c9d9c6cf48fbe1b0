package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/test/benchenv"
	"github.com/packline/packline/test/hfserver"
	"github.com/packline/packline/test/regtest"
)

// BenchmarkReimport runs the worker on a Hugging Face model (the Hub
// fixture, PACKLINE_BENCH_BYTES in 4 safetensors shards plus config,
// default 512 MiB) to the real registry, every run in a fresh workspace as
// after a released PVC: first run; the same run again (targets: 0 bytes
// downloaded and uploaded, ≤5% of the first run's time); after a commit
// that changes one shard (that shard only). Bytes are counted by proxies
// in front of the Hub and the registry.
func BenchmarkReimport(b *testing.B) {
	total := benchenv.Bytes(b, 512<<20)
	per := int(total / 4)
	files := map[string][]byte{"config.json": []byte(`{"model_type":"bench"}`)}
	for i := range 4 {
		files[fmt.Sprintf("model-%05d-of-00004.safetensors", i+1)] = shard(byte(i), per)
	}
	reg, up := regtest.Proxy(b, regtest.Start(b))
	hub, err := hfserver.Start(map[string]hfserver.Repo{"org/bench": {Files: files}})
	if err != nil {
		b.Fatal(err)
	}
	defer hub.Close()
	hubURL, down := hubProxy(b, hub.URL)
	mb := float64(total) / (1 << 20)

	for i := range b.N {
		a := workerv1.Artifact{
			Source: v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "org/bench", Endpoint: hubURL}},
			Format: v1alpha1.FormatModelKit,
			Target: workerv1.Target{Repository: fmt.Sprintf("%s/bench/reimport-%d", reg, i), Tag: "v1", PlainHTTP: true},
		}
		step := func(name string) (time.Duration, int64, int64) {
			down.Store(0)
			up.Reset()
			start := time.Now()
			benchWorker(b, a)
			d := time.Since(start)
			b.Logf("%s: %s, downloaded %d bytes, uploaded %d bytes", name, d.Round(time.Millisecond), down.Load(), up.Uploaded())
			return d, down.Load(), up.Uploaded()
		}
		t1, _, _ := step("first run")
		t2, d2, u2 := step("re-run, fresh workspace")
		changed := maps.Clone(files)
		changed["model-00002-of-00004.safetensors"] = shard(99, per)
		hub.Set("org/bench", hfserver.Repo{Files: changed})
		t3, d3, u3 := step("one shard changed")
		hub.Set("org/bench", hfserver.Repo{Files: files})

		b.ReportMetric(mb/t1.Seconds(), "first_MB/s")
		b.ReportMetric(t2.Seconds()/t1.Seconds(), "rerun/first_time")
		b.ReportMetric(float64(d2), "rerun_down_bytes")
		b.ReportMetric(float64(u2), "rerun_up_bytes")
		b.ReportMetric(t3.Seconds()/t1.Seconds(), "oneshard/first_time")
		b.ReportMetric(float64(d3)/float64(per), "oneshard_down/shard")
		b.ReportMetric(float64(u3)/float64(per), "oneshard_up/shard")
		b.Logf("%.0f MiB: re-run %.3f of the first run's time (target ≤0.05), %d bytes down, %d up (target 0); one shard changed: %.2f shards down, %.2f up, %.3f of the time",
			mb, t2.Seconds()/t1.Seconds(), d2, u2, float64(d3)/float64(per), float64(u3)/float64(per), t3.Seconds()/t1.Seconds())
	}
}

// benchWorker runs `worker artifact` in-process in a fresh workspace.
func benchWorker(b *testing.B, a workerv1.Artifact) {
	b.Helper()
	encoded, err := workerv1.EncodeSpec(a)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	log := filepath.Join(dir, "termination-log")
	b.Setenv(workerv1.EnvSpec, encoded)
	b.Setenv(EnvTerminationLog, log)
	b.Setenv(EnvWorkspace, filepath.Join(dir, "ws"))
	if code := run([]string{"artifact"}); code != 0 {
		msg, _ := os.ReadFile(log)
		b.Fatalf("worker exit %d: %s", code, msg)
	}
	if msg, err := os.ReadFile(log); err != nil {
		b.Fatal(err)
	} else if res, err := workerv1.ParseResult(msg); err != nil || res.Failed() {
		b.Fatalf("result %s: %v", msg, err)
	}
}
