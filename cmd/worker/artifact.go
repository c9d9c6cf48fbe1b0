package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/format"
	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/netx"
	"github.com/packline/packline/jobs/push"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/jobs/sign"
	"github.com/packline/packline/jobs/source"
)

// Overrides of api/worker/v1's fixed pod paths, for tests and the sandbox's
// process node, where pods are local processes.
const (
	EnvWorkspace         = "PACKLINE_WORKSPACE"
	EnvSourceAuthDir     = "PACKLINE_SOURCE_AUTH_DIR"
	EnvSourceVolumeDir   = "PACKLINE_SOURCE_VOLUME_DIR"
	EnvPullAuthDir       = "PACKLINE_PULL_AUTH_DIR"
	EnvArchiveMaxBytes   = workerv1.EnvArchiveMaxBytes
	EnvArchiveMaxEntries = "PACKLINE_ARCHIVE_MAX_ENTRIES"
)

func init() { commands["artifact"] = runArtifact }

// runArtifact fetches, packs and pushes an Artifact, and signs what it
// pushed when the spec asks; a retry after a failed signature push only
// signs (workerv1.EnvPushedDigest).
func runArtifact(ctx context.Context) workerv1.Result {
	started := time.Now().UTC()
	var a workerv1.Artifact
	if err := workerv1.LoadSpec(&a); err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, err))
	}
	if err := format.CheckCompression(a.Compression); err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("spec.%w", err)))
	}
	if a.Target.Repository == "" {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("target.repository is empty")))
	}
	ctx, waitSigner, err := startSigner(ctx, a.Signing)
	if err != nil {
		return failure.ToResult(err)
	}
	repo, err := registry.Repository(a.Target.Repository, registry.TargetOptions(a.Target))
	if err != nil {
		return failure.ToResult(err)
	}
	var res workerv1.Result
	if pushed := os.Getenv(workerv1.EnvPushedDigest); pushed != "" && a.Signing != nil {
		var desc ocispec.Descriptor
		if desc, err = earlierPush(ctx, repo, a.Target.Repository, pushed); err == nil {
			res = success(a, desc.Digest.String(), desc.MediaType, desc.ArtifactType, desc.Size, os.Getenv(workerv1.EnvPushedRevision))
			res, err = withImageOf(ctx, repo, res, desc)
		}
	} else {
		res, err = artifact(ctx, a, repo, func() error { _, err := waitSigner(); return err })
	}
	return signedResult(ctx, waitSigner, repo, a.Target.Repository, res, err, func(revision string) sign.Provenance {
		return artifactProvenance(a, revision, os.Getenv(workerv1.EnvHFEndpoint), started)
	})
}

// artifact fetches the source, writes the Kitfile, packs and pushes.
// keyReady is called before the manifest is pushed and tagged (see
// startSigner).
func artifact(ctx context.Context, a workerv1.Artifact, repo *remote.Repository, keyReady func() error) (workerv1.Result, error) {
	ws := envOr(EnvWorkspace, workerv1.WorkspaceDir)

	if a.Source.OCI != nil {
		// A copy pushes the manifest as it goes: the key must be known.
		if err := keyReady(); err != nil {
			return workerv1.Result{}, err
		}
		desc, err := source.CopyOCI(ctx, *a.Source.OCI, envOr(EnvPullAuthDir, workerv1.PullAuthDir), repo, a.Target.Tag)
		if err != nil {
			return workerv1.Result{}, err
		}
		return withImageOf(ctx, repo, success(a, desc.Digest.String(), desc.MediaType, desc.ArtifactType, desc.Size, desc.Digest.String()), desc)
	}

	// What earlier runs pushed, looked up before fetching a byte.
	// Not finding them only costs the work they would save; the push
	// itself reports a registry that is really down or refusing.
	prev, err := push.LoadPrevious(ctx, repo, a.Target.Tag, a.Previous)
	if err != nil {
		fmt.Fprintf(os.Stderr, "artifact: earlier pushes not looked up: %v\n", err)
	}
	for _, m := range prev.Found {
		fmt.Fprintf(os.Stderr, "artifact: reusing layers of %s\n", m)
	}
	env := source.Env{
		Workspace:       ws,
		SourceAuthDir:   envOr(EnvSourceAuthDir, workerv1.SourceAuthDir),
		SourceVolumeDir: envOr(EnvSourceVolumeDir, workerv1.SourceVolumeDir),
		HFToken:         os.Getenv(workerv1.EnvHFToken),
		HFEndpoint:      os.Getenv(workerv1.EnvHFEndpoint),
		Archive: source.Limits{
			MaxBytes:   envInt(EnvArchiveMaxBytes),
			MaxEntries: int(envInt(EnvArchiveMaxEntries)),
		},
		HTTP: httpClient(),
		Log:  os.Stderr,
		Lazy: true,
	}
	// A source that names its revision up front (a Git commit, an HTTP
	// sha256) whose earlier push is still whole is re-used as is.
	inputKey := ""
	if rev, ok := source.Identify(ctx, a.Source, env); ok {
		if inputKey, err = push.InputKey(input{a.Source, a.Format, a.Compression, a.Kitfile, a.Annotations, rev}); err != nil {
			return workerv1.Result{}, failure.Permanent(workerv1.ReasonInvalidSpec, err)
		}
		desc, st, ok, err := push.ReuseManifest(ctx, repo, prev, inputKey, a.Target.Tag)
		if err != nil {
			fmt.Fprintf(os.Stderr, "artifact: earlier push %s not re-used: %v\n", desc.Digest, err)
		}
		if ok && err == nil {
			fmt.Fprintf(os.Stderr, "artifact: %s already pushed from %s: %d layers, none fetched or uploaded (%d mounted)\n", desc.Digest, rev, st.Layers, st.Mounted)
			return withImageOf(ctx, repo, success(a, desc.Digest.String(), desc.MediaType, desc.ArtifactType, desc.Size, rev), desc)
		}
	}
	fetched, err := source.Fetch(ctx, a.Source, env)
	if err != nil {
		return workerv1.Result{}, err
	}
	kf, stated, err := buildKitfile(fetched, a.Kitfile)
	if err != nil {
		return workerv1.Result{}, err
	}
	desc, st, err := push.Push(ctx, repo, fetched.Root, kf, push.Options{
		Format:         a.Format,
		Compression:    a.Compression,
		CacheDir:       filepath.Join(ws, kitfile.StateDir, "cache"),
		Tag:            a.Target.Tag,
		Annotations:    a.Annotations,
		Provenance:     push.Provenance{Source: fetched.URL, Revision: fetched.Revision, Created: fetched.Time},
		Stated:         stated,
		Log:            os.Stderr,
		FileID:         fetched.FileID,
		LocalFileIDs:   fetched.LocalIDs,
		Previous:       prev,
		Complete:       fetched.Complete,
		Prehashed:      fetched.Prehashed,
		InputKey:       inputKey,
		BeforeManifest: keyReady,
	})
	if err != nil {
		return workerv1.Result{}, err
	}
	fmt.Fprintf(os.Stderr, "artifact: %d layers, %d uploaded (%d bytes; %d hashed while downloaded), %d already present (%d mounted)\n", st.Layers, st.Uploaded, st.UploadedBytes, st.Prehashed, st.Skipped, st.Mounted)
	fmt.Fprintf(os.Stderr, "artifact: image view %s for image volumes (%d bytes added, no layer)\n", st.Image.Digest, st.ImageBytes)
	return withImage(success(a, desc.Digest.String(), desc.MediaType, desc.ArtifactType, desc.Size, fetched.Revision), st.Image), nil
}

// withImageOf pushes the image view of desc, a manifest an earlier run
// pushed or a copy, reading its manifest and config only (push.PushImageOf).
// A copy that is not a ModelKit or ModelPack has none.
func withImageOf(ctx context.Context, repo *remote.Repository, res workerv1.Result, desc ocispec.Descriptor) (workerv1.Result, error) {
	img, st, err := push.PushImageOf(ctx, repo, desc, "")
	if errors.Is(err, push.ErrNotModel) {
		fmt.Fprintf(os.Stderr, "artifact: no image view of %s: %v\n", desc.Digest, err)
		return res, nil
	}
	if err != nil {
		return workerv1.Result{}, failure.Registry(fmt.Errorf("image view of %s: %w", desc.Digest, err))
	}
	fmt.Fprintf(os.Stderr, "artifact: image view %s for image volumes (%d bytes added, no layer)\n", img.Digest, st.ExtraBytes)
	return withImage(res, img), nil
}

// withImage names the image view img in res, in res's repository.
func withImage(res workerv1.Result, img ocispec.Descriptor) workerv1.Result {
	if img.Digest == "" {
		return res
	}
	repo, _, _ := strings.Cut(res.Reference, "@")
	res.ImageDigest, res.ImageReference = img.Digest.String(), repo+"@"+img.Digest.String()
	return res
}

// input is what an Artifact's push is made from, for push.InputKey: the
// target and the earlier references are not part of it.
type input struct {
	Source      v1alpha1.ArtifactSource `json:"source"`
	Format      v1alpha1.PackFormat     `json:"format"`
	Compression v1alpha1.Compression    `json:"compression,omitempty"`
	Kitfile     string                  `json:"kitfile,omitempty"`
	Annotations map[string]string       `json:"annotations,omitempty"`
	Revision    string                  `json:"revision"`
}

// buildKitfile generates a Kitfile from the fetched files and merges the
// user's over it. stated reports the paths the user's Kitfile names.
func buildKitfile(f source.Fetched, user string) (*kitfile.Kitfile, func(string) bool, error) {
	dir, err := kitfile.Scan(f.Root)
	if err != nil {
		return nil, nil, failure.Permanent(workerv1.ReasonPackFailed, err)
	}
	kf := kitfile.Generate(dir)
	kf.Package.Name = f.Name
	stated := map[string]bool{}
	if user != "" {
		u, err := kitfile.Parse([]byte(user))
		if err != nil {
			return nil, nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("spec.kitfile: %w", err))
		}
		kf = kitfile.Merge(kf, u)
		for _, p := range u.Paths() {
			stated[p] = true
		}
	}
	if err := kitfile.Validate(kf, f.Root); err != nil {
		return nil, nil, failure.Permanent(workerv1.ReasonInvalidSpec, err)
	}
	return kf, func(p string) bool { return stated[path.Clean(p)] }, nil
}

// success is the result for a manifest; size is the manifest's, the object
// reference points at.
func success(a workerv1.Artifact, digest, mediaType, artifactType string, size int64, revision string) workerv1.Result {
	return workerv1.Result{
		Digest:         digest,
		Reference:      a.Target.Repository + "@" + digest,
		MediaType:      mediaType,
		ArtifactType:   artifactType,
		Size:           size,
		SourceRevision: revision,
		Tag:            a.Target.Tag,
	}
}

// httpClient bounds connection setup and idle transfers (netx), not whole
// downloads, which may take hours for a large model.
func httpClient() *http.Client { return netx.Client() }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string) int64 {
	n, _ := strconv.ParseInt(os.Getenv(name), 10, 64)
	return n
}
