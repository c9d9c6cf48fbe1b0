package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiffFiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, cur map[string]string
		want     string
	}{
		{name: "same", old: map[string]string{"a.yaml": "x: 1\n"}, cur: map[string]string{"a.yaml": "x: 1\n"}, want: ""},
		{name: "a changed line among unchanged ones",
			old:  map[string]string{"deployment.apps_app.yaml": "kind: Deployment\nspec:\n  replicas: 2\n"},
			cur:  map[string]string{"deployment.apps_app.yaml": "kind: Deployment\nspec:\n  replicas: 3\n"},
			want: "--- deployment.apps_app.yaml (pushed)\n+++ deployment.apps_app.yaml (rendered)\n kind: Deployment\n spec:\n-  replicas: 2\n+  replicas: 3\n"},
		{name: "added and removed files",
			old:  map[string]string{"gone.yaml": "a: 1\n", "same.yaml": "s\n"},
			cur:  map[string]string{"new.yaml": "b: 2\n", "same.yaml": "s\n"},
			want: "--- gone.yaml (removed)\n-a: 1\n+++ new.yaml (new)\n+b: 2\n"},
	} {
		if diff := cmp.Diff(tc.want, DiffFiles(tc.old, tc.cur)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
