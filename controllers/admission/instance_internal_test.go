package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// TestDropEmptyInstance: an empty instance label is the default
// instance's, so it is removed (the default manager selects "no label");
// any other value stays.
func TestDropEmptyInstance(t *testing.T) {
	cases := []struct {
		name       string
		labels     map[string]string
		want       map[string]string
		wantWarned bool
	}{
		{"no labels", nil, nil, false},
		{"no instance label", map[string]string{"app": "x"}, map[string]string{"app": "x"}, false},
		{"named instance", map[string]string{"packline.dev/instance": "blue"}, map[string]string{"packline.dev/instance": "blue"}, false},
		{"empty instance", map[string]string{"packline.dev/instance": "", "app": "x"}, map[string]string{"app": "x"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &v1alpha1.Artifact{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
			warning := dropEmptyInstance(a)
			if diff := cmp.Diff(tc.want, a.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if (warning != "") != tc.wantWarned {
				t.Errorf("warning = %q", warning)
			}
		})
	}
}
