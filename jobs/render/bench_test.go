package render_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/jobs/render/internal/build"
	"github.com/packline/packline/jobs/render/internal/overlay"
)

// BenchmarkCodeServerClaim times rendering the code-server claim (NodePort
// with a pinned port, the full GPU profile, every binding set) and prints
// ratios against baselines measured in the same run:
//
//   - manifests: the worker's whole render (overlay, guard, sandboxed
//     krusty, post-render);
//   - krusty-sandboxed: krusty alone on the in-memory sandbox;
//   - krusty-default: krusty with kustomize's default options on the same
//     tree written to disk (what `kustomize build` does);
//   - kubectl-kustomize: `kubectl kustomize` on that tree, when kubectl is
//     on PATH (process start included, as a user would see it).
//
// Run: go test ./jobs/render -run '^$' -bench CodeServerClaim -benchtime 20x
func BenchmarkCodeServerClaim(b *testing.B) {
	fx := snapshot(b)
	values := map[string]any{"replicas": 3, "image": "nginx:1.27", "logLevel": "debug", "password": "hunter2", "priorityClass": "high"}
	c := claim(apps[0], fx.srv.URL, v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort, NodePort: ptr[int32](30080)}, gpuProfile, rawValues(b, values))

	// The overlay as the worker writes it, for the baselines to build.
	dec := json.NewDecoder(bytes.NewReader(c.Values.Raw))
	dec.UseNumber()
	var vals map[string]any
	if err := dec.Decode(&vals); err != nil {
		b.Fatal(err)
	}
	ov, err := overlay.Build(overlay.Input{Namespace: c.Namespace, Template: c.Template, Values: vals, Exposure: c.Exposure, Profile: c.Profile, RepoDir: build.RepoFromOverlay})
	if err != nil {
		b.Fatal(err)
	}
	memfs, _, err := build.Sandbox(fx.snap, ov)
	if err != nil {
		b.Fatal(err)
	}
	disk := b.TempDir()
	materialise(b, memfs, disk)

	perOp := map[string]time.Duration{}
	measure := func(name string, fn func() error) {
		b.Run(name, func(b *testing.B) {
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
			perOp[name] = time.Since(start) / time.Duration(b.N)
		})
	}
	measure("manifests", func() error {
		_, err := render.Manifests(c, fx.snap, render.Limits{})
		return err
	})
	measure("krusty-sandboxed", func() error {
		_, err := krusty.MakeKustomizer(build.Options()).Run(memfs, build.OverlayDir)
		return err
	})
	measure("krusty-default", func() error {
		_, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(disk, "overlay"))
		return err
	})
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		measure("kubectl-kustomize", func() error {
			var stderr bytes.Buffer
			cmd := exec.Command(kubectl, "kustomize", filepath.Join(disk, "overlay"))
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("kubectl kustomize: %v: %s", err, stderr.String())
			}
			return nil
		})
	} else {
		b.Log("kubectl not on PATH: skipping the kubectl kustomize baseline")
	}

	m := perOp["manifests"]
	if m == 0 {
		return
	}
	fmt.Printf("code-server claim render: manifests %v/op\n", m)
	for _, base := range []string{"krusty-sandboxed", "krusty-default", "kubectl-kustomize"} {
		if d, ok := perOp[base]; ok {
			fmt.Printf("  %-18s %v/op  ratio %s/manifests = %.2f\n", base, d, base, float64(d)/float64(m))
		}
	}
}

// materialise copies an in-memory filesystem to dir.
func materialise(b *testing.B, fs filesys.FileSystem, dir string) {
	b.Helper()
	err := fs.Walk("/", func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := fs.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
}
