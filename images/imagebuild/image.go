package imagebuild

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Result is one built image per command.
type Result struct {
	// Indexes maps a command name to its multi-platform index.
	Indexes map[string]v1.ImageIndex
	// Order lists the commands as they were given.
	Order []string
}

// Build compiles every command for every platform and assembles the images.
// Nothing is written but temporary binaries; see Push and WriteLayout.
func Build(ctx context.Context, o Options) (*Result, error) {
	if len(o.Commands) == 0 || len(o.Platforms) == 0 {
		return nil, fmt.Errorf("imagebuild: no command or no platform")
	}
	if o.Created.IsZero() {
		// The zero time.Time is year 1, which tar cannot store; the Unix
		// epoch is what SOURCE_DATE_EPOCH=0 would give.
		o.Created = time.Unix(0, 0)
	}
	if o.CACerts == "" {
		o.CACerts = DefaultCACerts
	}
	// The base layer first: a missing CA bundle should fail before minutes
	// of compiling.
	base, err := baseLayer(&o)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "packline-imagebuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	res := &Result{Indexes: map[string]v1.ImageIndex{}}
	for _, command := range o.Commands {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, plat := range o.Platforms {
			start := time.Now()
			bin, err := compile(ctx, &o, command, plat, tmp)
			if err != nil {
				return nil, err
			}
			img, err := image(&o, command, plat, base, bin)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", command, plat.String(), err)
			}
			p := plat
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
				Add:        img,
				Descriptor: v1.Descriptor{Platform: &p},
			})
			o.logf("built %s for %s in %s", command, plat.String(), time.Since(start).Round(time.Millisecond))
		}
		// Registries and UIs (GHCR, Harbor) read the labels from the index,
		// since a multi-platform reference resolves to it, not to a config.
		idx = mutate.Annotations(idx, o.labels(command)).(v1.ImageIndex)
		res.Indexes[command] = idx
		res.Order = append(res.Order, command)
	}
	return res, nil
}

// image is one command for one platform: the shared base layer, then the
// binary, run as nonroot from its home.
func image(o *Options, command string, plat v1.Platform, base v1.Layer, bin string) (v1.Image, error) {
	binLayer, err := binaryLayer(o, command, bin)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created.UTC()}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "packline imagebuild: CA certificates, passwd, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: created, CreatedBy: "packline imagebuild: go build ./cmd/" + command}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Config.User = fmt.Sprintf("%d:%d", Nonroot, Nonroot)
	cf.Config.Entrypoint = []string{"/" + command}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	}
	cf.Config.Labels = o.labels(command)
	return mutate.ConfigFile(img, cf)
}
