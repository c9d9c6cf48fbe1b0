package undecodable

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/packline/packline/api/v1alpha1"
)

// badField names the field that keeps a stored object from decoding, so
// the Undecodable event tells the admin what to fix.
func TestBadField(t *testing.T) {
	decode := func(m map[string]any) error {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(m, &v1alpha1.EnvironmentProfile{})
	}
	profile := func(spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "packline.dev/v1alpha1", "kind": "EnvironmentProfile",
			"metadata": map[string]any{"name": "p"}, "spec": spec}
	}
	cases := []struct {
		name string
		obj  map[string]any
		want string
	}{
		{"a duration", profile(map[string]any{"delivery": map[string]any{"flux": map[string]any{"interval": "soon"}}}), "spec.delivery.flux.interval"},
		{"inside a list", profile(map[string]any{"tolerations": []any{map[string]any{"key": "a"}, map[string]any{"tolerationSeconds": "never"}}}), "spec.tolerations[1].tolerationSeconds"},
		{"two bad fields: what holds both", profile(map[string]any{
			"delivery":    map[string]any{"flux": map[string]any{"interval": "soon"}},
			"tolerations": []any{map[string]any{"tolerationSeconds": "never"}}}), "spec"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if decode(tc.obj) == nil {
				t.Fatal("the fixture decodes")
			}
			if diff := cmp.Diff(tc.want, badField(tc.obj, decode)); diff != "" {
				t.Errorf("(-want +got): %s", diff)
			}
		})
	}
}
