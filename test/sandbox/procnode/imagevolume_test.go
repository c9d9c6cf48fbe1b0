package procnode

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestMountableLayers(t *testing.T) {
	layer := func(mt string) ocispec.Descriptor {
		return ocispec.Descriptor{MediaType: mt, Digest: digest.FromString(mt)}
	}
	kitLayers := []ocispec.Descriptor{layer("application/vnd.kitops.modelkit.model.v1.tar"), layer("application/vnd.kitops.modelkit.docs.v1.tar")}
	imageLayers := []ocispec.Descriptor{layer(ocispec.MediaTypeImageLayer), layer(ocispec.MediaTypeImageLayerGzip), layer(ocispec.MediaTypeImageLayerZstd)}
	for _, tc := range []struct {
		name string
		m    ocispec.Manifest
		want []ocispec.Descriptor
	}{
		{"ModelKit: nothing, as containerd", ocispec.Manifest{Config: ocispec.Descriptor{MediaType: "application/vnd.kitops.modelkit.config.v1+json"}, Layers: kitLayers}, nil},
		{"ModelPack: nothing", ocispec.Manifest{Config: ocispec.Descriptor{MediaType: "application/vnd.cncf.model.config.v1+json"}, Layers: []ocispec.Descriptor{layer(ocispec.MediaTypeImageLayer)}}, nil},
		{"empty config artifact: nothing", ocispec.Manifest{Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer(ocispec.MediaTypeImageLayerGzip)}}, nil},
		{"image: its image layers", ocispec.Manifest{Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig}, Layers: imageLayers}, imageLayers},
		{"image config, artifact layers: skipped", ocispec.Manifest{Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig}, Layers: append(kitLayers, imageLayers[0])}, imageLayers[:1]},
		{"docker image", ocispec.Manifest{Config: ocispec.Descriptor{MediaType: dockerImageConfig}, Layers: []ocispec.Descriptor{layer(dockerLayerGzip)}}, []ocispec.Descriptor{layer(dockerLayerGzip)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, mountableLayers(tc.m)); diff != "" {
				t.Errorf("mountableLayers (-want +got):\n%s", diff)
			}
		})
	}
}
