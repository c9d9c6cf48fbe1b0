package render_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/jobs/render/internal/build"
	"github.com/packline/packline/jobs/render/source"
)

// nestedBases is the template from the audit: level k holds six
// kustomizations, each adding its own namePrefix to level k-1, so level n
// renders 6^n ConfigMaps from 2+7n files (37 files give 7,776 objects).
func nestedBases(levels int) (*source.Snapshot, int) {
	s := &source.Snapshot{Files: map[string][]byte{}, Symlinks: map[string]bool{}}
	s.Files["nested/level0/kustomization.yaml"] = []byte("resources:\n  - cm.yaml\n")
	s.Files["nested/level0/cm.yaml"] = []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: v\n")
	for l := 1; l <= levels; l++ {
		var top strings.Builder
		top.WriteString("resources:\n")
		for _, p := range []string{"a", "b", "c", "d", "e", "f"} {
			top.WriteString("  - " + p + "\n")
			s.Files[fmt.Sprintf("nested/level%d/%s/kustomization.yaml", l, p)] =
				fmt.Appendf(nil, "namePrefix: %s-\nresources:\n  - ../../level%d\n", p, l-1)
		}
		s.Files[fmt.Sprintf("nested/level%d/kustomization.yaml", l)] = []byte(top.String())
	}
	return s, len(s.Files)
}

func nestedClaim(levels int) workerv1.Claim {
	return workerv1.Claim{Name: "n", Namespace: "team-a", Template: v1alpha1.ClaimTemplateSpec{
		Source: v1alpha1.TemplateSource{URL: "https://git.example.com/t.git", Ref: "main", Path: fmt.Sprintf("nested/level%d", levels)},
		Kinds:  []v1alpha1.RenderedKind{{Kind: "ConfigMap"}},
	}}
}

// TestRenderBoundedBeforeKrusty: the nested-bases template is refused as
// a permanent RenderTooLarge from its estimate, before krusty builds the
// objects in memory. 6^4 = 1,296 objects is already over the default
// bound (1,000); 6^5 = 7,776 is the audit's case.
func TestRenderBoundedBeforeKrusty(t *testing.T) {
	for _, levels := range []int{4, 5} {
		t.Run(fmt.Sprintf("6^%d objects", levels), func(t *testing.T) {
			snap, files := nestedBases(levels)
			_, err := render.Manifests(nestedClaim(levels), snap, render.Limits{})
			var fe *failure.Error
			if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonRenderTooLarge || !fe.Permanent {
				t.Fatalf("%d files: got %v, want a permanent %s", files, err, workerv1.ReasonRenderTooLarge)
			}
			if want := fmt.Sprintf("about %d objects", pow(6, levels)); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
	t.Run("6^3 objects fit", func(t *testing.T) {
		snap, _ := nestedBases(3)
		files, err := render.Manifests(nestedClaim(3), snap, render.Limits{})
		if err != nil || len(files) != 216 {
			t.Fatalf("%d files, %v; want 216", len(files), err)
		}
	})
}

// TestRenderDeadline: a build that is within the estimate but runs past
// the deadline is abandoned as a permanent RenderTooLarge.
func TestRenderDeadline(t *testing.T) {
	snap, _ := nestedBases(3)
	_, err := render.Manifests(nestedClaim(3), snap, render.Limits{Build: build.Limits{Timeout: time.Millisecond}})
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonRenderTooLarge || !strings.Contains(err.Error(), "did not finish within 1ms") {
		t.Fatalf("got %v, want RenderTooLarge past the deadline", err)
	}
}

func pow(b, n int) int {
	r := 1
	for range n {
		r *= b
	}
	return r
}
