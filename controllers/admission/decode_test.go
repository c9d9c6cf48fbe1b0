package admission

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/packline/packline/api/v1alpha1"
)

// A value the schema lets through but the Go types refuse is reported with
// its field's path, not only with what is wrong with the value.
func TestDecodeErrorsNameTheField(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	dec := admission.NewDecoder(scheme)
	cases := []struct {
		name string
		obj  string
		want string
	}{
		{name: "duration in a Claim's delivery", obj: `{"apiVersion":"packline.dev/v1alpha1","kind":"Claim","metadata":{"name":"c"},
			"spec":{"templateRef":{"name":"t"},"delivery":{"flux":{"interval":"soon"}}}}`,
			want: `spec.delivery.flux.interval: time: invalid duration "soon"`},
		{name: "quantity in an Artifact's resources", obj: `{"apiVersion":"packline.dev/v1alpha1","kind":"Artifact","metadata":{"name":"a"},
			"spec":{"source":{"http":{"url":"https://x"}},"target":{"repository":"r"},"resources":{"requests":{"memory":"lots"}}}}`,
			want: "spec.resources.requests.memory: quantities must match the regular expression"},
		{name: "inline pipeline field", obj: `{"apiVersion":"packline.dev/v1alpha1","kind":"Artifact","metadata":{"name":"a"},
			"spec":{"source":{"http":{"url":"https://x"}},"target":{"repository":"r"},"timeout":"later"}}`,
			want: `spec.timeout: time: invalid duration "later"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var obj = claimKind.new()
			if tc.name != "duration in a Claim's delivery" {
				obj = artifactKind.new()
			}
			err := decode(dec, runtime.RawExtension{Raw: []byte(tc.obj)}, obj)
			if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
				t.Errorf("error %v, want it to start with %q", err, tc.want)
			}
		})
	}
}

// The mutating webhook's patch touches the requester annotations only.
func TestAnnotationPatch(t *testing.T) {
	stamp := map[string]string{v1alpha1.AnnotationRequester: "r", v1alpha1.AnnotationRequesterSeal: "s"}
	cases := []struct {
		name    string
		current map[string]string
		stamp   map[string]string
		want    string
	}{
		{name: "no annotations", stamp: stamp,
			want: `[{"op":"add","path":"/metadata/annotations","value":{"packline.dev/requester":"r","packline.dev/requester-seal":"s"}}]`},
		{name: "other annotations kept", current: map[string]string{"a": "b"}, stamp: stamp,
			want: `[{"op":"add","path":"/metadata/annotations/packline.dev~1requester","value":"r"},{"op":"add","path":"/metadata/annotations/packline.dev~1requester-seal","value":"s"}]`},
		{name: "forged ones replaced", current: map[string]string{v1alpha1.AnnotationRequester: "forged", v1alpha1.AnnotationRequesterSeal: "s"}, stamp: stamp,
			want: `[{"op":"add","path":"/metadata/annotations/packline.dev~1requester","value":"r"}]`},
		{name: "forged ones removed when the stored object had none", current: map[string]string{v1alpha1.AnnotationRequester: "forged", "a": "b"}, stamp: map[string]string{},
			want: `[{"op":"remove","path":"/metadata/annotations/packline.dev~1requester"}]`},
		{name: "nothing to do", current: stamp, stamp: stamp, want: `null`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := annotationPatch(tc.current, tc.stamp)
			if ops == nil {
				ops = []jsonpatch.JsonPatchOperation(nil)
			}
			got, _ := json.Marshal(ops)
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}
