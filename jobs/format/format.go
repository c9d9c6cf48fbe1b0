// Package format holds the media types and annotations of the two model
// artifact formats the worker writes. The modules that define them upstream
// are not available from our module proxy, so they are restated here, each
// with the specification it comes from:
//
//   - KitOps ModelKit: https://github.com/kitops-ml/kitops/blob/main/docs/src/docs/modelkit/spec.md
//     and the kit CLI's pkg/lib/constants/mediatype (kitops.go, artifacttype.go)
//     and pkg/lib/constants/consts.go for the ml.kitops.* annotations.
//   - CNCF ModelPack (model-spec): https://github.com/modelpack/model-spec/blob/main/docs/spec.md,
//     specs-go/v1/mediatype.go and specs-go/v1/annotations.go.
package format

import (
	"fmt"

	"github.com/packline/packline/api/v1alpha1"
)

// KitOps ModelKit.
const (
	// KitArtifactType is the manifest artifactType kit writes and checks.
	KitArtifactType = "application/vnd.kitops.modelkit.manifest.v1+json"
	// KitConfig is the config blob: the Kitfile as JSON, with each layer's
	// digest and diffId filled in.
	KitConfig = "application/vnd.kitops.modelkit.config.v1+json"
	// KitAnnotationKitfile carries the Kitfile JSON on a ModelPack manifest;
	// kit reads it there to unpack a ModelPack to the Kitfile's paths.
	KitAnnotationKitfile = "ml.kitops.modelkit.kitfile"
)

// CNCF ModelPack.
const (
	ModelPackArtifactType = "application/vnd.cncf.model.manifest.v1+json"
	ModelPackConfig       = "application/vnd.cncf.model.config.v1+json"
	// AnnotationFilepath is the layer's path relative to the artifact root.
	// kit sets it on the layers of both formats, so we do too.
	AnnotationFilepath = "org.cncf.model.filepath"
)

// Kind is what a layer holds, in Kitfile terms.
type Kind string

const (
	Model     Kind = "model"
	ModelPart Kind = "modelpart"
	Dataset   Kind = "dataset"
	Code      Kind = "code"
	Docs      Kind = "docs"
)

// Kinds lists every Kind in the order layers are written.
var Kinds = []Kind{Model, ModelPart, Code, Dataset, Docs}

// modelPackBase is the model-spec name of each kind ("weight", "weight.config", …).
var modelPackBase = map[Kind]string{
	Model:     "weight",
	ModelPart: "weight.config",
	Dataset:   "dataset",
	Code:      "code",
	Docs:      "doc",
}

// ArtifactType returns the manifest artifactType of f.
func ArtifactType(f v1alpha1.PackFormat) string {
	if f == v1alpha1.FormatModelPack {
		return ModelPackArtifactType
	}
	return KitArtifactType
}

// ConfigMediaType returns the config media type of f.
func ConfigMediaType(f v1alpha1.PackFormat) string {
	if f == v1alpha1.FormatModelPack {
		return ModelPackConfig
	}
	return KitConfig
}

// LayerMediaType returns the media type of a tar layer of kind k, gzipped or not.
func LayerMediaType(f v1alpha1.PackFormat, k Kind, gzip bool) string {
	suffix := "tar"
	if gzip {
		suffix = "tar+gzip"
	}
	if f == v1alpha1.FormatModelPack {
		return fmt.Sprintf("application/vnd.cncf.model.%s.v1.%s", modelPackBase[k], suffix)
	}
	return fmt.Sprintf("application/vnd.kitops.modelkit.%s.v1.%s", k, suffix)
}

// ParseLayer is LayerMediaType's inverse; ok is false for a foreign type.
func ParseLayer(mediaType string) (f v1alpha1.PackFormat, k Kind, gzip bool, ok bool) {
	for _, f := range []v1alpha1.PackFormat{v1alpha1.FormatModelKit, v1alpha1.FormatModelPack} {
		for _, k := range Kinds {
			for _, gz := range []bool{false, true} {
				if LayerMediaType(f, k, gz) == mediaType {
					return f, k, gz, true
				}
			}
		}
	}
	return "", "", false, false
}
