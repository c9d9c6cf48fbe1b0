package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Published is where one command's index went.
type Published struct {
	Command string
	// Ref is the tag reference, e.g. 127.0.0.1:5000/packline/worker:v1.
	Ref string
	// Digest is the index digest; Ref@Digest is what to deploy.
	Digest v1.Hash
}

// Push writes each index to <repoPrefix>/<command>:<tag>. plainHTTP allows a
// registry without TLS (loopback, sandbox); credentials come from the
// docker config, as for any registry client.
func (r *Result) Push(ctx context.Context, repoPrefix, tag string, plainHTTP bool) ([]Published, error) {
	var opts []name.Option
	if plainHTTP {
		opts = append(opts, name.Insecure)
	}
	var out []Published
	for _, command := range r.Order {
		idx := r.Indexes[command]
		ref, err := name.NewTag(fmt.Sprintf("%s/%s:%s", repoPrefix, command, tag), opts...)
		if err != nil {
			return nil, err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, Published{Command: command, Ref: ref.String(), Digest: d})
	}
	return out, nil
}

// refName is the OCI layout annotation that names an index, as `skopeo`,
// `crane` and `oras` read it (oci:<dir>:<name>).
const refName = "org.opencontainers.image.ref.name"

// WriteLayout adds each index to the OCI image layout at dir, named
// "<command>:<tag>". An index of the same name is replaced, so re-running a
// build does not pile up entries; other entries are kept.
func (r *Result) WriteLayout(dir, tag string) ([]Published, error) {
	p, err := openLayout(dir)
	if err != nil {
		return nil, err
	}
	var out []Published
	for _, command := range r.Order {
		idx := r.Indexes[command]
		ref := command + ":" + tag
		if err := p.ReplaceIndex(idx, match.Annotation(refName, ref), layout.WithAnnotations(map[string]string{refName: ref})); err != nil {
			return nil, fmt.Errorf("writing %s to %s: %w", ref, dir, err)
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, err
		}
		out = append(out, Published{Command: command, Ref: "oci:" + dir + ":" + ref, Digest: d})
	}
	return out, nil
}

func openLayout(dir string) (layout.Path, error) {
	p, err := layout.FromPath(dir)
	if err == nil {
		return p, nil
	}
	if _, statErr := os.Stat(filepath.Join(dir, "index.json")); !errors.Is(statErr, fs.ErrNotExist) {
		return "", fmt.Errorf("%s is not an OCI layout: %w", dir, err)
	}
	return layout.Write(dir, empty.Index)
}
