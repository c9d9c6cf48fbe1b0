package render_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/test/fixtures"
)

// A render holding a kind the template does not declare fails permanently,
// naming every undeclared kind; declaring them all renders.
func TestUndeclaredKind(t *testing.T) {
	fx := snapshot(t)
	cases := []struct {
		name  string
		kinds []v1alpha1.RenderedKind
		want  string // empty: renders
	}{
		{name: "all declared", kinds: fixtures.TemplateKinds},
		{name: "PVC and Service missing", kinds: []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "ConfigMap"}, {Kind: "Secret"}},
			want: "spec.kinds: PersistentVolumeClaim, Service;"},
		{name: "right kind, wrong group", kinds: []v1alpha1.RenderedKind{{Group: "extensions", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}, {Kind: "ConfigMap"}, {Kind: "Secret"}},
			want: "spec.kinds: Deployment.apps;"},
		{name: "none declared", want: "ConfigMap, Deployment.apps, PersistentVolumeClaim, Secret, Service"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := claim(apps[0], fx.srv.URL, v1alpha1.Exposure{}, nil, nil)
			c.Template.Kinds = tc.kinds
			_, err := render.Manifests(c, fx.snap, render.Limits{})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *failure.Error
			if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonUndeclaredKind || !fe.Permanent {
				t.Fatalf("err = %v, want a permanent %s", err, workerv1.ReasonUndeclaredKind)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}
