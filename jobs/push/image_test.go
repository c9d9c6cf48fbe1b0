package push

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/regtest"
)

func TestImageView(t *testing.T) {
	subject := digest.FromString("artifact manifest")
	d := func(s string) digest.Digest { return digest.FromString(s) }
	ann := map[string]string{format.AnnotationFilepath: "config.json"}
	layers := []ocispec.Descriptor{
		{MediaType: format.LayerMediaType(v1alpha1.FormatModelKit, format.Model, ""), Digest: d("plain"), Size: 10},
		{MediaType: format.LayerMediaType(v1alpha1.FormatModelPack, format.WeightConfig, v1alpha1.CompressionGzip), Digest: d("gz"), Size: 20, Annotations: ann},
		{MediaType: format.LayerMediaType(v1alpha1.FormatModelPack, format.Weight, v1alpha1.CompressionZstd), Digest: d("zst"), Size: 30},
	}
	diffIDs := []digest.Digest{d("plain"), d("gz-tar"), d("zst-tar")}

	config, manifest, err := imageView(subject, layers, diffIDs, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	var gotConfig ocispec.Image
	if err := json.Unmarshal(config, &gotConfig); err != nil {
		t.Fatal(err)
	}
	wantConfig := ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: "arm64"},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	}
	if diff := cmp.Diff(wantConfig, gotConfig); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	var gotManifest ocispec.Manifest
	if err := json.Unmarshal(manifest, &gotManifest); err != nil {
		t.Fatal(err)
	}
	wantManifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(config), Size: int64(len(config))},
		Layers: []ocispec.Descriptor{
			{MediaType: ocispec.MediaTypeImageLayer, Digest: d("plain"), Size: 10},
			{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: d("gz"), Size: 20, Annotations: ann},
			{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: d("zst"), Size: 30},
		},
		Annotations: map[string]string{AnnotationImageOf: subject.String()},
	}
	if diff := cmp.Diff(wantManifest, gotManifest); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}

	// Deterministic: the same inputs give the same bytes.
	config2, manifest2, _ := imageView(subject, layers, diffIDs, "arm64")
	if !bytes.Equal(config, config2) || !bytes.Equal(manifest, manifest2) {
		t.Error("the same inputs gave other bytes")
	}
	// Small: all the view adds to the registry.
	if n := len(config) + len(manifest); n > 2048 {
		t.Errorf("config and manifest are %d bytes for 3 layers", n)
	}

	for name, tc := range map[string]struct {
		layers  []ocispec.Descriptor
		diffIDs []digest.Digest
	}{
		"not a tar layer": {[]ocispec.Descriptor{{MediaType: "application/octet-stream", Digest: d("x")}}, []digest.Digest{d("x")}},
		"no diff id":      {layers[:1], []digest.Digest{""}},
		"count mismatch":  {layers, diffIDs[:1]},
	} {
		if _, _, err := imageView(subject, tc.layers, tc.diffIDs, "amd64"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDiffIDsOf(t *testing.T) {
	d := func(s string) digest.Digest { return digest.FromString(s) }
	kitTar := format.LayerMediaType(v1alpha1.FormatModelKit, format.Model, "")
	kitGz := format.LayerMediaType(v1alpha1.FormatModelKit, format.Code, v1alpha1.CompressionGzip)
	packZst := format.LayerMediaType(v1alpha1.FormatModelPack, format.Weight, v1alpha1.CompressionZstd)
	for _, tc := range []struct {
		name    string
		m       ocispec.Manifest
		config  string
		want    []digest.Digest
		wantErr bool
	}{{
		name: "ModelKit: uncompressed is its digest, compressed from the Kitfile",
		m: ocispec.Manifest{Config: ocispec.Descriptor{MediaType: format.KitConfig}, Layers: []ocispec.Descriptor{
			{MediaType: kitTar, Digest: d("model")}, {MediaType: kitGz, Digest: d("code.gz")}}},
		config: `{"manifestVersion":"1.0.0","package":{"name":"x"},"model":{"path":"m","digest":"` + d("model").String() + `"},` +
			`"code":[{"path":"c","digest":"` + d("code.gz").String() + `","diffId":"` + d("code").String() + `"}]}`,
		want: []digest.Digest{d("model"), d("code")},
	}, {
		name: "ModelPack: modelfs.diffIds",
		m: ocispec.Manifest{Config: ocispec.Descriptor{MediaType: format.ModelPackConfig}, Layers: []ocispec.Descriptor{
			{MediaType: packZst, Digest: d("w.zst")}}},
		config: `{"modelfs":{"type":"layers","diffIds":["` + d("w").String() + `"]}}`,
		want:   []digest.Digest{d("w")},
	}, {
		name: "a compressed layer the config says nothing of",
		m: ocispec.Manifest{Config: ocispec.Descriptor{MediaType: format.KitConfig}, Layers: []ocispec.Descriptor{
			{MediaType: kitGz, Digest: d("code.gz")}}},
		config:  `{"manifestVersion":"1.0.0"}`,
		wantErr: true,
	}, {
		name:    "not a model",
		m:       ocispec.Manifest{Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig}},
		config:  `{}`,
		wantErr: true,
	}} {
		got, err := diffIDsOf(tc.m, []byte(tc.config))
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// The image view of a real push: the same layer blobs (no byte sent
// twice, only its config and manifest), diff_ids that are the sha256 of
// each decompressed layer, files at the paths kit unpacks them to, and
// the same digest when made again from the registry alone (a re-used or
// copied push).
func TestImageViewOfPush(t *testing.T) {
	host, count := regtest.Proxy(t, regtest.Start(t))
	for _, f := range []v1alpha1.PackFormat{v1alpha1.FormatModelKit, v1alpha1.FormatModelPack} {
		for _, c := range []v1alpha1.Compression{v1alpha1.CompressionNone, v1alpha1.CompressionGzip, v1alpha1.CompressionZstd} {
			t.Run(string(f)+"/"+string(c), func(t *testing.T) {
				root := t.TempDir()
				writeTree(t, root, modelFiles)
				repo := repoAt(t, host, "image/"+strings.ToLower(string(f))+"/"+string(c), registry.Options{})
				count.Reset()
				desc, st, err := Push(t.Context(), repo, root, generated(t, root), Options{Format: f, Compression: c, Tag: "v1"})
				if err != nil {
					t.Fatal(err)
				}
				if st.Image.Digest == "" || st.ImageBytes == 0 {
					t.Fatalf("no image view: %+v", st)
				}
				artifact, err := content.FetchAll(t.Context(), repo, desc)
				if err != nil {
					t.Fatal(err)
				}
				var am ocispec.Manifest
				if err := json.Unmarshal(artifact, &am); err != nil {
					t.Fatal(err)
				}
				// Sent: the layers, the artifact's config and manifest,
				// and the view's ImageBytes; nothing else.
				if got, want := count.Uploaded(), st.UploadedBytes+am.Config.Size+desc.Size+st.ImageBytes; got != want {
					t.Errorf("sent %d bytes, want %d (layers %d + artifact config and manifest %d + view %d)", got, want, st.UploadedBytes, am.Config.Size+desc.Size, st.ImageBytes)
				}
				t.Logf("%s/%s: the image view added %d bytes", f, c, st.ImageBytes)

				tagged, err := repo.Resolve(t.Context(), ImageTag(desc.Digest))
				if err != nil || tagged.Digest != st.Image.Digest {
					t.Fatalf("tag %s: %v, %v; want %s", ImageTag(desc.Digest), tagged.Digest, err, st.Image.Digest)
				}
				raw, err := content.FetchAll(t.Context(), repo, st.Image)
				if err != nil {
					t.Fatal(err)
				}
				var im ocispec.Manifest
				if err := json.Unmarshal(raw, &im); err != nil {
					t.Fatal(err)
				}
				cfgRaw, err := content.FetchAll(t.Context(), repo, im.Config)
				if err != nil {
					t.Fatal(err)
				}
				var cfg ocispec.Image
				if err := json.Unmarshal(cfgRaw, &cfg); err != nil {
					t.Fatal(err)
				}
				if len(im.Layers) != len(am.Layers) || len(cfg.RootFS.DiffIDs) != len(am.Layers) {
					t.Fatalf("%d image layers, %d diff ids for %d artifact layers", len(im.Layers), len(cfg.RootFS.DiffIDs), len(am.Layers))
				}
				var names []string
				for i, l := range im.Layers {
					if l.Digest != am.Layers[i].Digest || l.Size != am.Layers[i].Size {
						t.Errorf("layer %d is %s, the artifact's is %s", i, l.Digest, am.Layers[i].Digest)
					}
					blob, err := content.FetchAll(t.Context(), repo, l)
					if err != nil {
						t.Fatal(err)
					}
					tarBytes := decompress(t, l.MediaType, blob)
					if got := digest.FromBytes(tarBytes); got != cfg.RootFS.DiffIDs[i] {
						t.Errorf("layer %d: diff_id %s, uncompressed tar is %s", i, cfg.RootFS.DiffIDs[i], got)
					}
					names = append(names, tarNames(t, tarBytes)...)
				}
				for _, want := range []string{"config.json", "model.safetensors", "tokenizer.json", "nested/deep/part.gguf", "scripts/convert.py"} {
					if !slices.Contains(names, want) {
						t.Errorf("no %s in the image's layers: %q", want, names)
					}
				}

				// From the registry alone: the same view, nothing sent.
				count.Reset()
				again, ist, err := PushImageOf(t.Context(), repo, desc, "")
				if err != nil {
					t.Fatal(err)
				}
				if again.Digest != st.Image.Digest {
					got, _ := content.FetchAll(t.Context(), repo, again)
					t.Logf("from Push:\n%s\nfrom PushImageOf:\n%s", raw, got)
				}
				if again.Digest != st.Image.Digest || ist.ExtraBytes != 0 || count.Uploaded() != 0 {
					t.Errorf("PushImageOf: %s (+%d bytes, %d sent), want %s and nothing sent", again.Digest, ist.ExtraBytes, count.Uploaded(), st.Image.Digest)
				}
			})
		}
	}
}

func decompress(t *testing.T, mediaType string, blob []byte) []byte {
	t.Helper()
	var r io.Reader
	var err error
	switch mediaType {
	case ocispec.MediaTypeImageLayer:
		return blob
	case ocispec.MediaTypeImageLayerGzip:
		r, err = gzip.NewReader(bytes.NewReader(blob))
	case ocispec.MediaTypeImageLayerZstd:
		var z *zstd.Decoder
		z, err = zstd.NewReader(bytes.NewReader(blob))
		r = z
	default:
		t.Fatalf("layer media type %s", mediaType)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}
