package render_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/jobs/render/archive"
	"github.com/packline/packline/test/gitserver"
)

// inProcessRegistry is go-containerregistry's registry on httptest.
func inProcessRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// runClaim runs the whole worker step: clone over smart HTTP, render, push.
func runClaim(t *testing.T, c workerv1.Claim) (workerv1.Result, error) {
	t.Helper()
	return render.Run(context.Background(), c, render.Options{WorkDir: t.TempDir()})
}

func pushClaim(srvURL, host, repo, tag string, values map[string]any, t *testing.T) workerv1.Claim {
	c := claim(apps[0], srvURL, v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}, gpuProfile, rawValues(t, values))
	c.Target = workerv1.Target{Repository: host + "/" + repo, Tag: tag, PlainHTTP: true}
	return c
}

// pulled is what a consumer sees of a pushed artifact.
type pulled struct {
	manifest ocispec.Manifest
	config   []byte
	layer    []byte
}

func pull(t *testing.T, res workerv1.Result) pulled {
	t.Helper()
	ctx := context.Background()
	repoRef, _, _ := strings.Cut(res.Reference, "@")
	repo, err := registry.Repository(repoRef, registry.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := repo.Resolve(ctx, res.Tag)
	if err != nil {
		t.Fatalf("resolving tag %s: %v", res.Tag, err)
	}
	if desc.Digest.String() != res.Digest {
		t.Fatalf("tag %s points at %s, result says %s", res.Tag, desc.Digest, res.Digest)
	}
	mb, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		t.Fatal(err)
	}
	var p pulled
	if err := json.Unmarshal(mb, &p.manifest); err != nil {
		t.Fatal(err)
	}
	if p.config, err = content.FetchAll(ctx, repo, p.manifest.Config); err != nil {
		t.Fatal(err)
	}
	if len(p.manifest.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(p.manifest.Layers))
	}
	if p.layer, err = content.FetchAll(ctx, repo, p.manifest.Layers[0]); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPushAndPull(t *testing.T) {
	fx := snapshot(t)
	srv := serveFixture(t)
	host := inProcessRegistry(t)
	c := pushClaim(srv.URL, host, "claims/team-a/code", "v1", map[string]any{"replicas": 2}, t)
	res, err := runClaim(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Validate(); err != nil {
		t.Fatalf("result breaks the contract: %v", err)
	}
	wantRes := workerv1.Result{
		Digest: res.Digest, Reference: host + "/claims/team-a/code@" + res.Digest,
		MediaType: ocispec.MediaTypeImageManifest, ArtifactType: "application/vnd.cncf.flux.config.v1+json",
		Size: res.Size, SourceRevision: srv.Commits[0], Tag: "v1",
	}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	p := pull(t, res)
	if diff := cmp.Diff(map[string]string{
		"org.opencontainers.image.source":   srv.URL,
		"org.opencontainers.image.revision": "main@sha1:" + srv.Commits[0],
		"org.opencontainers.image.created":  gitserver.Epoch.Format(time.RFC3339),
	}, p.manifest.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if got := p.manifest.MediaType; got != ocispec.MediaTypeImageManifest {
		t.Errorf("manifest media type %s", got)
	}
	if got := p.manifest.Config.MediaType; got != "application/vnd.cncf.flux.config.v1+json" {
		t.Errorf("config media type %s", got)
	}
	if string(p.config) != "{}" {
		t.Errorf("config %q", p.config)
	}
	if got := p.manifest.Layers[0].MediaType; got != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("layer media type %s", got)
	}

	// The layer holds exactly the rendered files, as reproducible entries.
	want, err := render.Manifests(c, fx.snap, render.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got := untar(t, p.layer)
	if diff := cmp.Diff(sortedFiles(want), got); diff != "" {
		t.Errorf("layer content (-want +got):\n%s", diff)
	}
}

// untar reads a layer, checking every header is reproducible.
func untar(t *testing.T, layer []byte) []archive.File {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q / time %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var out []archive.File
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != 0 {
			t.Errorf("entry %s is not reproducible: %+v", h.Name, h)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, archive.File{Name: h.Name, Data: b})
	}
	for i := 1; i < len(out); i++ {
		if out[i-1].Name >= out[i].Name {
			t.Errorf("entries not sorted: %s before %s", out[i-1].Name, out[i].Name)
		}
	}
	return out
}

func sortedFiles(f []archive.File) []archive.File {
	b, _ := archive.Write(f)
	var out []archive.File
	zr, _ := gzip.NewReader(bytes.NewReader(b))
	tr := tar.NewReader(zr)
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		d, _ := io.ReadAll(tr)
		out = append(out, archive.File{Name: h.Name, Data: d})
	}
	return out
}

// TestDeterministic: the same commit, values and profile give a
// byte-identical layer and the same manifest digest, from separate clones
// and pushes to separate registries; a changed value gives a new digest.
func TestDeterministic(t *testing.T) {
	srv := serveFixture(t)
	values := map[string]any{"replicas": 3, "image": "nginx:1.27", "password": "hunter2", "greeting": "hi"}
	var results []workerv1.Result
	var layers [][]byte
	for i := range 2 {
		host := inProcessRegistry(t)
		res, err := runClaim(t, pushClaim(srv.URL, host, "claims/team-a/code", "v1", values, t))
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		results = append(results, res)
		layers = append(layers, pull(t, res).layer)
	}
	if !bytes.Equal(layers[0], layers[1]) {
		t.Error("layers differ between identical runs")
	}
	if results[0].Digest != results[1].Digest {
		t.Errorf("digests differ: %s vs %s", results[0].Digest, results[1].Digest)
	}

	values["replicas"] = 4
	res, err := runClaim(t, pushClaim(srv.URL, inProcessRegistry(t), "claims/team-a/code", "v1", values, t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest == results[0].Digest {
		t.Error("a changed value kept the same digest")
	}
}

func TestRunFailures(t *testing.T) {
	srv := serveFixture(t)
	host := inProcessRegistry(t)
	tests := []struct {
		name   string
		edit   func(*workerv1.Claim)
		reason string
		perm   bool
	}{
		{"no target", func(c *workerv1.Claim) { c.Target.Repository = "" }, workerv1.ReasonInvalidSpec, true},
		{"unknown ref", func(c *workerv1.Claim) { c.Template.Source.Ref = "no-such-branch" }, workerv1.ReasonSourceNotFound, true},
		{"bad template path", func(c *workerv1.Claim) { c.Template.Source.Path = "apps/missing" }, workerv1.ReasonRenderFailed, true},
		{"registry refuses connections", func(c *workerv1.Claim) { c.Target.Repository = closedPort(t) + "/claims/x" }, workerv1.ReasonRegistryFailed, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := pushClaim(srv.URL, host, "claims/team-a/code", "v1", nil, t)
			tc.edit(&c)
			_, err := runClaim(t, c)
			var fe *failure.Error
			if !errors.As(err, &fe) {
				t.Fatalf("want a classified failure, got %v", err)
			}
			if fe.Reason != tc.reason || fe.Permanent != tc.perm {
				t.Errorf("got %s permanent=%v, want %s permanent=%v: %v", fe.Reason, fe.Permanent, tc.reason, tc.perm, err)
			}
		})
	}
}

// TestCheckRendersWithoutPushing: a template check renders through the same
// steps, pushes nothing (no target at all), and reports the commit, the
// kinds and the digest the same render would push as its layer.
func TestCheckRendersWithoutPushing(t *testing.T) {
	srv := serveFixture(t)
	host := inProcessRegistry(t)
	c := pushClaim(srv.URL, host, "claims/team-a/code", "v1", map[string]any{"replicas": 2}, t)
	pushed, err := runClaim(t, c)
	if err != nil {
		t.Fatal(err)
	}
	c.Check, c.Target = true, workerv1.Target{}
	res, err := runClaim(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Validate(); err != nil {
		t.Fatalf("check result breaks the contract: %v", err)
	}
	if !res.Check || res.Reference != "" || res.SourceRevision != srv.Commits[0] {
		t.Errorf("check result = %+v", res)
	}
	if len(res.Kinds) == 0 || !slices.IsSorted(res.Kinds) || !slices.Contains(res.Kinds, "Deployment.apps") {
		t.Errorf("kinds = %v", res.Kinds)
	}
	if layer := pull(t, pushed).manifest.Layers[0].Digest.String(); layer != res.Digest {
		t.Errorf("check digest %s, pushed layer %s", res.Digest, layer)
	}
}
