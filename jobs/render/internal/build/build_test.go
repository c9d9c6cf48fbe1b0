package build_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/packline/packline/jobs/render/internal/build"
	"github.com/packline/packline/jobs/render/internal/overlay"
	"github.com/packline/packline/jobs/render/source"
	"github.com/packline/packline/test/gitserver"
)

// diskSnapshot reads a fixture tree straight from disk.
func diskSnapshot(t *testing.T, dir string) *source.Snapshot {
	t.Helper()
	s := &source.Snapshot{Files: map[string][]byte{}, Symlinks: map[string]bool{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		s.Files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFixtureSmokeOverlays builds the template repository's own
// tests/kustomize overlays in the sandbox, so a broken fixture fails here
// rather than as a confusing render-test diff.
func TestFixtureSmokeOverlays(t *testing.T) {
	snap := diskSnapshot(t, gitserver.FixtureDir(t, "templates"))
	dirs := map[string]bool{}
	for p := range snap.Files {
		if strings.HasPrefix(p, "tests/kustomize/") {
			dirs[path.Dir(p)] = true
		}
	}
	if len(dirs) != 9 {
		t.Fatalf("%d smoke overlays, want 3 apps × 3 exposures", len(dirs))
	}
	for dir := range dirs {
		t.Run(path.Base(dir), func(t *testing.T) {
			ov := &overlay.Overlay{Kustomization: types.Kustomization{
				TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
				Resources: []string{path.Join(build.RepoFromOverlay, dir)},
			}}
			m, err := build.Run(snap, ov)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]string{}
			for _, r := range m.Resources() {
				if r.GetNamespace() != "smoke-test" {
					t.Errorf("%s/%s in namespace %q", r.GetKind(), r.GetName(), r.GetNamespace())
				}
				if r.GetKind() == "Service" {
					typ, _ := r.GetString("spec.type")
					kinds["Service"] = typ
				} else {
					kinds[r.GetKind()] = r.GetName()
				}
			}
			want := "ClusterIP"
			switch {
			case strings.HasSuffix(dir, "-service-nodeport"):
				want = "NodePort"
			case strings.HasSuffix(dir, "-service-loadbalancer"):
				want = "LoadBalancer"
			}
			if kinds["Service"] != want {
				t.Errorf("service type %q, want %q", kinds["Service"], want)
			}
			if _, ok := kinds["Ingress"]; ok != strings.HasSuffix(dir, "-ingress") {
				t.Errorf("ingress present=%v", ok)
			}
			if _, ok := kinds["Deployment"]; !ok {
				t.Error("no Deployment")
			}
		})
	}
}
