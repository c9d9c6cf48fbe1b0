package render_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render"
)

// TestGuardWalksPluginFields: generators, transformers and validators may
// name directories (kustomizations whose output is plugin configurations),
// files holding builtin plugin configurations, or inline configurations;
// each of those can make krusty fetch a URL. Every one is refused before
// krusty runs, and the loopback server standing in for the internet never
// sees a request.
func TestGuardWalksPluginFields(t *testing.T) {
	fx := snapshot(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: remote\n"))
	}))
	t.Cleanup(srv.Close)
	const dir = "apps/code-server/base/"
	patchTransformer := "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: " + srv.URL + "/p.yaml\n"
	tests := map[string]map[string]string{
		"generators directory with a remote resource": {
			baseKustomization:              baseWith("generators:\n  - gen\n"),
			dir + "gen/kustomization.yaml": "resources:\n  - " + srv.URL + "/g.yaml\n",
		},
		"transformers directory with a remote component": {
			baseKustomization:               baseWith("transformers:\n  - tdir\n"),
			dir + "tdir/kustomization.yaml": "resources:\n  - t.yaml\ncomponents:\n  - " + srv.URL + "/c\n",
			dir + "tdir/t.yaml":             "apiVersion: builtin\nkind: LabelTransformer\nmetadata:\n  name: l\nlabels:\n  a: b\nfieldSpecs:\n  - path: metadata/labels\n    create: true\n",
		},
		"validators directory with a remote resource": {
			baseKustomization:              baseWith("validators:\n  - val\n"),
			dir + "val/kustomization.yaml": "resources:\n  - " + srv.URL + "/v.yaml\n",
		},
		"transformer file loading a remote patch": {
			baseKustomization: baseWith("transformers:\n  - t.yaml\n"),
			dir + "t.yaml":    patchTransformer,
		},
		"transformer in a directory loading a remote patch": {
			baseKustomization:               baseWith("transformers:\n  - tdir\n"),
			dir + "tdir/kustomization.yaml": "resources:\n  - t.yaml\n",
			dir + "tdir/t.yaml":             patchTransformer,
		},
		"inline transformer loading a remote patch": {
			baseKustomization: baseWith("transformers:\n  - |-\n" + indent(patchTransformer, "    ") + "\n"),
		},
		"generator config loading a remote file": {
			baseKustomization: baseWith("generators:\n  - g.yaml\n"),
			dir + "g.yaml":    "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: g\nfiles:\n  - k=" + srv.URL + "/f\n",
		},
		"replacement transformer loading a remote file": {
			baseKustomization: baseWith("transformers:\n  - r.yaml\n"),
			dir + "r.yaml":    "apiVersion: builtin\nkind: ReplacementTransformer\nmetadata:\n  name: r\nreplacements:\n  - path: " + srv.URL + "/r.yaml\n",
		},
		"strategic merge transformer loading a remote patch": {
			baseKustomization: baseWith("transformers:\n  - s.yaml\n"),
			dir + "s.yaml":    "apiVersion: builtin\nkind: PatchStrategicMergeTransformer\nmetadata:\n  name: s\npaths:\n  - " + srv.URL + "/s.yaml\n",
		},
		"env file of a secret generator": {
			baseKustomization: baseWith("secretGenerator:\n  - name: s\n    env: " + srv.URL + "/e.env\n"),
		},
	}
	for name, files := range tests {
		t.Run(name, func(t *testing.T) {
			c := claim(apps[0], fx.srv.URL, v1alpha1.Exposure{}, nil, nil)
			_, err := render.Manifests(c, withFiles(fx, files), render.Limits{})
			var fe *failure.Error
			if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonTemplateRejected || !fe.Permanent {
				t.Errorf("got %v, want a permanent %s", err, workerv1.ReasonTemplateRejected)
			}
			if n := hits.Swap(0); n != 0 {
				t.Errorf("the render reached the network: %d requests", n)
			}
		})
	}
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by)
}

// TestGeneratorNameStaysInOverlay: a generator's name comes from the
// template and becomes part of a file name in the overlay; one with ".."
// must not write over the template's own files.
func TestGeneratorNameStaysInOverlay(t *testing.T) {
	fx := snapshot(t)
	for _, name := range []string{"../../../repo/apps/code-server/base", "../../kustomization.yaml"} {
		t.Run(name, func(t *testing.T) {
			c := claim(apps[0], fx.srv.URL, v1alpha1.Exposure{}, nil, &apiextensionsv1.JSON{Raw: []byte(`{"deployment.yaml":"kind: Pod\n"}`)})
			c.Template.Generators = []v1alpha1.Generator{{Kind: "ConfigMap", Name: name, Values: []string{"deployment.yaml"}}}
			files, err := render.Manifests(c, fx.snap, render.Limits{})
			var fe *failure.Error
			if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonTemplateRejected || !fe.Permanent {
				t.Errorf("got %v (%d files), want a permanent %s", err, len(files), workerv1.ReasonTemplateRejected)
			}
		})
	}
}
