package deploy

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/packline/packline/images/imagebuild"
)

// image is one pushed image: its digest reference and the host binary
// pulled back out of it.
type image struct {
	ref    string
	binary string
}

// buildImages builds the manager and worker images for this host's
// platform, pushes them to the registry at host, and pulls each binary back
// out of its image, so the process node runs exactly what a kubelet would.
func buildImages(t *testing.T, root, host string) map[string]image {
	t.Helper()
	ctx := context.Background()
	res, err := imagebuild.Build(ctx, imagebuild.Options{
		ModuleDir: root,
		Commands:  []string{"manager", "worker"},
		Platforms: []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}},
		Version:   "v0.0.0-deploy",
		Revision:  "deploytest",
		Source:    "https://github.com/packline/packline",
		Created:   time.Unix(0, 0),
		Log:       t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := res.Push(ctx, host+"/packline", "deploy", true)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]image{}
	for _, p := range pub {
		tag, err := name.NewTag(p.Ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		ref := tag.Context().Digest(p.Digest.String())
		out[p.Command] = image{ref: ref.String(), binary: extract(t, ref, p.Command)}
	}
	return out
}

// extract pulls ref and writes its /<command> for this platform to a file.
func extract(t *testing.T, ref name.Digest, command string) string {
	t.Helper()
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("%s: %d manifests", ref, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s holds no /%s", ref, command)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != command {
			continue
		}
		path := filepath.Join(t.TempDir(), command)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
}
