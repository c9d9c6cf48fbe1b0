// Package format holds the media types and annotations of the two model
// artifact formats the worker writes. The modules that define them upstream
// are not available from our module proxy, so they are restated here, each
// with the source it comes from:
//
//   - KitOps ModelKit: pkg/lib/constants/mediaType.go and consts.go of
//     github.com/kitops-ml/kitops (read at commit a041892, 2025-08-19), and
//     its ModelKit spec, pkg/artifact/spec.md.
//   - CNCF ModelPack: github.com/modelpack/model-spec docs/spec.md,
//     docs/annotations.md, specs-go/v1/mediatype.go and annotations.go
//     (read at commit d78bf32, 2026-06-08).
//
// The tests in this package pin every string to those sources; the push
// package's tests pull what we push and check it against them.
package format

import (
	"fmt"
	"strings"

	"github.com/packline/packline/api/v1alpha1"
)

// KitOps ModelKit.
const (
	// KitArtifactType is the manifest artifactType we set on ModelKits, for
	// registries and OCI 1.1 clients that filter by it. The kit CLI of the
	// commit above writes none; its info, inspect and unpack read our
	// ModelKits with it (checked by hand, see docs/reference/artifact-formats.md).
	KitArtifactType = "application/vnd.kitops.modelkit.manifest.v1+json"
	// KitConfig is the config blob: the Kitfile as JSON, with each layer's
	// digest and diffId filled in.
	KitConfig = "application/vnd.kitops.modelkit.config.v1+json"
)

// CNCF ModelPack.
const (
	ModelPackArtifactType = "application/vnd.cncf.model.manifest.v1+json"
	ModelPackConfig       = "application/vnd.cncf.model.config.v1+json"

	// AnnotationFilepath is the layer's path relative to the artifact root.
	// We write it on ModelPack layers only: kit writes no layer annotations.
	AnnotationFilepath = "org.cncf.model.filepath"
	// AnnotationFileMetadata is the JSON FileMetadata of the layer's file.
	AnnotationFileMetadata = "org.cncf.model.file.metadata+json"
	// AnnotationMediaTypeUntested is "true" when the layer's type was
	// inferred (from a file name) rather than stated by the user.
	AnnotationMediaTypeUntested = "org.cncf.model.file.mediatype.untested"
)

// FileMetadata is the value of AnnotationFileMetadata, field for field as
// model-spec's specs-go/v1 FileMetadata. Mtime is RFC 3339, as Go's
// time.Time marshals there.
type FileMetadata struct {
	Name     string `json:"name"`
	Mode     uint32 `json:"mode"`
	Uid      uint32 `json:"uid"`
	Gid      uint32 `json:"gid"`
	Size     int64  `json:"size"`
	ModTime  string `json:"mtime"`
	Typeflag byte   `json:"typeflag"`
}

// Kind is what a layer holds: a Kitfile kind (model … docs) for a ModelKit,
// a model-spec kind (weight … doc) for a ModelPack.
type Kind string

// Kitfile kinds, the ModelKit layer names.
const (
	Model     Kind = "model"
	ModelPart Kind = "modelpart"
	Dataset   Kind = "dataset"
	Code      Kind = "code"
	Docs      Kind = "docs"
)

// Model-spec kinds, the ModelPack layer names. Code and Dataset are shared.
const (
	Weight       Kind = "weight"
	WeightConfig Kind = "weight.config"
	Doc          Kind = "doc"
)

// Kinds lists the Kitfile kinds in the order layers are written.
var Kinds = []Kind{Model, ModelPart, Code, Dataset, Docs}

// PackKinds lists the model-spec kinds.
var PackKinds = []Kind{Weight, WeightConfig, Code, Dataset, Doc}

// Compressions lists the layer compressions, media type suffix by suffix.
var Compressions = []v1alpha1.Compression{v1alpha1.CompressionNone, v1alpha1.CompressionGzip, v1alpha1.CompressionZstd}

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

// LayerMediaType returns the media type of a tar layer of kind k. Both
// formats name compression the same way: ".tar", ".tar+gzip", ".tar+zstd".
// kit's media type pattern (mediaTypeRegexp) accepts any "+<word>" suffix;
// the kit CLI of the commit above writes none and gzip only.
func LayerMediaType(f v1alpha1.PackFormat, k Kind, c v1alpha1.Compression) string {
	suffix := "tar"
	if c != "" && c != v1alpha1.CompressionNone {
		suffix += "+" + string(c)
	}
	if f == v1alpha1.FormatModelPack {
		return fmt.Sprintf("application/vnd.cncf.model.%s.v1.%s", k, suffix)
	}
	return fmt.Sprintf("application/vnd.kitops.modelkit.%s.v1.%s", k, suffix)
}

// ParseLayer is LayerMediaType's inverse; ok is false for a foreign type.
func ParseLayer(mediaType string) (f v1alpha1.PackFormat, k Kind, c v1alpha1.Compression, ok bool) {
	for _, f := range []v1alpha1.PackFormat{v1alpha1.FormatModelKit, v1alpha1.FormatModelPack} {
		kinds := Kinds
		if f == v1alpha1.FormatModelPack {
			kinds = PackKinds
		}
		for _, k := range kinds {
			for _, c := range Compressions {
				if LayerMediaType(f, k, c) == mediaType {
					return f, k, c, true
				}
			}
		}
	}
	return "", "", "", false
}

// PackKindOf maps the Kitfile kinds that keep their type in a ModelPack.
// Model and ModelPart files are classified one by one (see push), so they
// have no fixed mapping and ok is false.
func PackKindOf(k Kind) (Kind, bool) {
	switch k {
	case Code, Dataset:
		return k, true
	case Docs:
		return Doc, true
	}
	return "", false
}

// CheckCompression refuses an unknown compression, naming the field.
func CheckCompression(c v1alpha1.Compression) error {
	for _, ok := range Compressions {
		if c == ok {
			return nil
		}
	}
	if c == "" {
		return nil
	}
	names := make([]string, len(Compressions))
	for i, c := range Compressions {
		names[i] = string(c)
	}
	return fmt.Errorf("compression %q is not one of %s", c, strings.Join(names, ", "))
}
