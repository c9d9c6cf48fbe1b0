package format

import (
	"encoding/json"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
)

// The literal strings are copied from the specifications on purpose: the
// test fails if LayerMediaType ever drifts from them. ModelKit: kit's
// MediaType.String; ModelPack: model-spec specs-go/v1/mediatype.go.
func TestLayerMediaType(t *testing.T) {
	const (
		kit = v1alpha1.FormatModelKit
		mp  = v1alpha1.FormatModelPack
		no  = v1alpha1.CompressionNone
		gz  = v1alpha1.CompressionGzip
		zst = v1alpha1.CompressionZstd
	)
	cases := []struct {
		f    v1alpha1.PackFormat
		k    Kind
		c    v1alpha1.Compression
		want string
	}{
		{kit, Model, no, "application/vnd.kitops.modelkit.model.v1.tar"},
		{kit, ModelPart, gz, "application/vnd.kitops.modelkit.modelpart.v1.tar+gzip"},
		{kit, Dataset, zst, "application/vnd.kitops.modelkit.dataset.v1.tar+zstd"},
		{kit, Code, no, "application/vnd.kitops.modelkit.code.v1.tar"},
		{kit, Docs, no, "application/vnd.kitops.modelkit.docs.v1.tar"},
		{mp, Weight, no, "application/vnd.cncf.model.weight.v1.tar"},
		{mp, Weight, gz, "application/vnd.cncf.model.weight.v1.tar+gzip"},
		{mp, Weight, zst, "application/vnd.cncf.model.weight.v1.tar+zstd"},
		{mp, WeightConfig, no, "application/vnd.cncf.model.weight.config.v1.tar"},
		{mp, WeightConfig, zst, "application/vnd.cncf.model.weight.config.v1.tar+zstd"},
		{mp, Dataset, gz, "application/vnd.cncf.model.dataset.v1.tar+gzip"},
		{mp, Code, no, "application/vnd.cncf.model.code.v1.tar"},
		{mp, Doc, zst, "application/vnd.cncf.model.doc.v1.tar+zstd"},
	}
	for _, tc := range cases {
		if got := LayerMediaType(tc.f, tc.k, tc.c); got != tc.want {
			t.Errorf("LayerMediaType(%s, %s, %s) = %q, want %q", tc.f, tc.k, tc.c, got, tc.want)
		}
		f, k, c, ok := ParseLayer(tc.want)
		if !ok || f != tc.f || k != tc.k || c != tc.c {
			t.Errorf("ParseLayer(%q) = %s %s %s %t", tc.want, f, k, c, ok)
		}
	}
	for _, foreign := range []string{"application/vnd.oci.image.layer.v1.tar", "application/vnd.cncf.model.docs.v1.tar", "application/vnd.kitops.modelkit.weight.v1.tar"} {
		if _, _, _, ok := ParseLayer(foreign); ok {
			t.Errorf("ParseLayer accepted %q", foreign)
		}
	}
}

func TestCheckCompression(t *testing.T) {
	for _, c := range []v1alpha1.Compression{"", "none", "gzip", "zstd"} {
		if err := CheckCompression(c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
	if err := CheckCompression("gzip-fastest"); err == nil {
		t.Error("gzip-fastest accepted")
	}
}

// The JSON keys are model-spec's (specs-go/v1 FileMetadata), written out.
func TestFileMetadataJSON(t *testing.T) {
	b, err := json.Marshal(FileMetadata{Name: "run.sh", Mode: 0o755, Uid: 1000, Size: 18, ModTime: "2024-01-02T03:04:05Z", Typeflag: '0'})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"run.sh","mode":493,"uid":1000,"gid":0,"size":18,"mtime":"2024-01-02T03:04:05Z","typeflag":48}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
