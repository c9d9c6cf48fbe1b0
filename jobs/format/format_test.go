package format

import (
	"testing"

	"github.com/packline/packline/api/v1alpha1"
)

// The literal strings are copied from the specifications on purpose: the
// test fails if LayerMediaType ever drifts from them.
func TestLayerMediaType(t *testing.T) {
	cases := []struct {
		f    v1alpha1.PackFormat
		k    Kind
		gz   bool
		want string
	}{
		{v1alpha1.FormatModelKit, Model, false, "application/vnd.kitops.modelkit.model.v1.tar"},
		{v1alpha1.FormatModelKit, ModelPart, true, "application/vnd.kitops.modelkit.modelpart.v1.tar+gzip"},
		{v1alpha1.FormatModelKit, Dataset, false, "application/vnd.kitops.modelkit.dataset.v1.tar"},
		{v1alpha1.FormatModelKit, Code, false, "application/vnd.kitops.modelkit.code.v1.tar"},
		{v1alpha1.FormatModelKit, Docs, false, "application/vnd.kitops.modelkit.docs.v1.tar"},
		{v1alpha1.FormatModelPack, Model, false, "application/vnd.cncf.model.weight.v1.tar"},
		{v1alpha1.FormatModelPack, ModelPart, false, "application/vnd.cncf.model.weight.config.v1.tar"},
		{v1alpha1.FormatModelPack, Dataset, true, "application/vnd.cncf.model.dataset.v1.tar+gzip"},
		{v1alpha1.FormatModelPack, Code, false, "application/vnd.cncf.model.code.v1.tar"},
		{v1alpha1.FormatModelPack, Docs, false, "application/vnd.cncf.model.doc.v1.tar"},
	}
	for _, tc := range cases {
		if got := LayerMediaType(tc.f, tc.k, tc.gz); got != tc.want {
			t.Errorf("LayerMediaType(%s, %s, %t) = %q, want %q", tc.f, tc.k, tc.gz, got, tc.want)
		}
		f, k, gz, ok := ParseLayer(tc.want)
		if !ok || f != tc.f || k != tc.k || gz != tc.gz {
			t.Errorf("ParseLayer(%q) = %s %s %t %t", tc.want, f, k, gz, ok)
		}
	}
	if _, _, _, ok := ParseLayer("application/vnd.oci.image.layer.v1.tar"); ok {
		t.Error("ParseLayer accepted an OCI image layer")
	}
}
