package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/packline/packline/test/regtest"
)

var testCreated = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

func testOptions(t *testing.T) Options {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	plats, err := ParsePlatforms(testPlatforms())
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		ModuleDir: root,
		Commands:  []string{"manager", "worker"},
		Platforms: plats,
		Version:   "v0.0.0-imagetest",
		Revision:  "0123456789abcdef0123456789abcdef01234567",
		Source:    "https://github.com/packline/packline",
		Created:   testCreated,
		Log:       t.Logf,
	}
}

// testPlatforms is the host's platform, so that make test stays quick;
// PACKLINE_SLOW=1 (make test-slow, which CI runs) cross-builds both
// published platforms, as make images does.
func testPlatforms() string {
	if os.Getenv("PACKLINE_SLOW") == "1" {
		return "linux/amd64,linux/arm64"
	}
	return "linux/" + runtime.GOARCH
}

// TestBuild compiles the real manager and worker for the test platforms
// once, then checks the images as a registry client sees them, their
// reproducibility and the OCI layout output.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the manager and worker")
	}
	opts := testOptions(t)
	res, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("push and pull back", func(t *testing.T) {
		host := regtest.Start(t)
		pub, err := res.Push(context.Background(), host+"/packline", "test", true)
		if err != nil {
			t.Fatal(err)
		}
		if len(pub) != 2 {
			t.Fatalf("published %d images, want 2", len(pub))
		}
		for _, p := range pub {
			ref, err := name.ParseReference(p.Ref, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := remote.Index(ref)
			if err != nil {
				t.Fatalf("pulling %s: %v", p.Ref, err)
			}
			if d, _ := idx.Digest(); d != p.Digest {
				t.Errorf("%s: registry serves %s, pushed %s", p.Ref, d, p.Digest)
			}
			checkIndex(t, opts, p.Command, idx)
		}
	})

	t.Run("same inputs give the same digests", func(t *testing.T) {
		// A second build relinks every binary into a new temp folder with new
		// file times, so any leak of paths or times changes a digest.
		again, err := Build(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range opts.Commands {
			d1, _ := res.Indexes[c].Digest()
			d2, _ := again.Indexes[c].Digest()
			if d1 != d2 {
				t.Errorf("%s: two builds gave %s and %s", c, d1, d2)
			}
			t.Logf("%s index %s", c, d1)
		}
	})

	t.Run("OCI layout", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "oci")
		// Twice: a re-run replaces the named entries rather than adding.
		for i := 0; i < 2; i++ {
			if _, err := res.WriteLayout(dir, "test"); err != nil {
				t.Fatal(err)
			}
		}
		p, err := layout.FromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		top, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		im, err := top.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 2 {
			t.Fatalf("layout holds %d entries, want 2: %+v", len(im.Manifests), im.Manifests)
		}
		for _, d := range im.Manifests {
			command, _, _ := strings.Cut(d.Annotations[refName], ":")
			want, _ := res.Indexes[command].Digest()
			if d.Digest != want {
				t.Errorf("layout entry %q = %s, want %s", d.Annotations[refName], d.Digest, want)
			}
			idx, err := top.ImageIndex(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkIndex(t, opts, command, idx)
		}
	})
}

// checkIndex checks one command's index: every platform built, the
// labels, and each image's config and files.
func checkIndex(t *testing.T, o Options, command string, idx v1.ImageIndex) {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("%s: index media type %s", command, im.MediaType)
	}
	checkLabels(t, command+" index", o, command, im.Annotations)
	var plats []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("%s: manifest %s without platform", command, d.Digest)
		}
		plats = append(plats, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, o, command, *d.Platform, img)
	}
	if got := strings.Join(plats, ","); got != testPlatforms() {
		t.Errorf("%s: platforms %s", command, got)
	}
}

func checkLabels(t *testing.T, what string, o Options, command string, got map[string]string) {
	t.Helper()
	want := map[string]string{
		LabelSource: o.Source, LabelRevision: o.Revision, LabelVersion: o.Version,
		LabelCreated: "2025-03-14T15:09:26Z", LabelTitle: "packline-" + command,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

func checkImage(t *testing.T, o Options, command string, plat v1.Platform, img v1.Image) {
	t.Helper()
	what := command + " " + plat.String()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != plat.OS || cf.Architecture != plat.Architecture {
		t.Errorf("%s: config says %s/%s", what, cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q", what, cf.Config.User)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/"+command || len(cf.Config.Cmd) != 0 {
		t.Errorf("%s: entrypoint %q cmd %q", what, cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.WorkingDir != "/home/nonroot" {
		t.Errorf("%s: workdir %q", what, cf.Config.WorkingDir)
	}
	if !cf.Created.Time.Equal(testCreated) {
		t.Errorf("%s: created %s", what, cf.Created)
	}
	checkLabels(t, what, o, command, cf.Config.Labels)
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %s", what, mt)
	}

	files := readFS(t, img)
	passwd := string(files["etc/passwd"].data)
	if !strings.Contains(passwd, "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd lacks nonroot 65532:\n%s", what, passwd)
	}
	host, _ := os.ReadFile(DefaultCACerts)
	if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, host) {
		t.Errorf("%s: CA bundle differs from the build host's", what)
	}
	bin, ok := files[command]
	if !ok {
		t.Fatalf("%s: no /%s in the image", what, command)
	}
	if bin.hdr.Mode != 0o755 || bin.hdr.Uid != 0 {
		t.Errorf("%s: /%s mode %o uid %d", what, command, bin.hdr.Mode, bin.hdr.Uid)
	}
	for p, f := range files {
		if !f.hdr.ModTime.Equal(testCreated) {
			t.Errorf("%s: %s mtime %s, want the build time", what, p, f.hdr.ModTime)
		}
	}
	checkBinary(t, what, o, plat, bin.data)
}

// checkBinary proves the image holds a static binary for its platform and,
// for the host's own platform, that it runs and was stamped with the version.
func checkBinary(t *testing.T, what string, o Options, plat v1.Platform, data []byte) {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: not an ELF binary: %v", what, err)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[plat.Architecture]
	if ef.Machine != machine {
		t.Errorf("%s: ELF machine %s", what, ef.Machine)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: dynamically linked; the empty base has no loader", what)
		}
	}
	if plat.Architecture != runtime.GOARCH || runtime.GOOS != "linux" {
		return
	}
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", what, err)
	}
	if got := strings.TrimSpace(string(out)); got != o.Version {
		t.Errorf("%s --version = %q, want %q", what, got, o.Version)
	}
}

type file struct {
	hdr  *tar.Header
	data []byte
}

// readFS flattens the image's layers as a runtime would unpack them.
func readFS(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = file{hdr: h, data: b}
	}
	return files
}
