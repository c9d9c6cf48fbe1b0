package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/push"
	"github.com/packline/packline/jobs/registry"
)

func init() { commands["resolve"] = runResolve }

// runResolve reports what the target tag names, as the run that pushed it
// would have: digest, reference, media and artifact type, size, and the
// source revision from the manifest's annotation.
func runResolve(ctx context.Context) workerv1.Result {
	var r workerv1.Resolve
	if err := workerv1.LoadSpec(&r); err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, err))
	}
	res, err := resolveTag(ctx, r.Target)
	if err != nil {
		return failure.ToResult(err)
	}
	return res
}

func resolveTag(ctx context.Context, t workerv1.Target) (workerv1.Result, error) {
	tag := t.Tag
	if tag == "" {
		tag = "latest"
	}
	repo, err := registry.Repository(t.Repository, registry.TargetOptions(t))
	if err != nil {
		return workerv1.Result{}, err
	}
	desc, rc, err := repo.FetchReference(ctx, tag)
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return workerv1.Result{}, failure.Permanent(workerv1.ReasonResultUnavailable,
			fmt.Errorf("the run completed on a worker cluster, but tag %s of %s names nothing", tag, t.Repository))
	case err != nil:
		return workerv1.Result{}, failure.Registry(err)
	}
	raw, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return workerv1.Result{}, failure.Registry(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return workerv1.Result{}, failure.Permanent(workerv1.ReasonResultUnavailable, fmt.Errorf("tag %s of %s is not an image manifest: %v", tag, t.Repository, err))
	}
	artifactType := m.ArtifactType
	if artifactType == "" {
		artifactType = m.Config.MediaType
	}
	res := workerv1.Result{
		Digest: desc.Digest.String(), Reference: t.Repository + "@" + desc.Digest.String(),
		MediaType: desc.MediaType, ArtifactType: artifactType, Size: desc.Size, Tag: tag,
		SourceRevision: revisionOf(m.Annotations[ocispec.AnnotationRevision]),
	}
	img, err := imageViewOf(ctx, repo, desc.Digest)
	if err != nil {
		return workerv1.Result{}, err
	}
	if img != "" {
		res.ImageDigest, res.ImageReference = img, t.Repository+"@"+img
	}
	return res, nil
}

// imageViewOf is the digest of the image view the run pushed beside the
// artifact (tag push.ImageTag(artifact), annotated as its view), or ""
// when there is none (a Claim's artifact, or a format without one): the
// pushing run reports it in its result, so the read-back must too, or
// status.imageDigest of a dispatched run would be empty.
func imageViewOf(ctx context.Context, repo *remote.Repository, artifact digest.Digest) (string, error) {
	desc, rc, err := repo.FetchReference(ctx, push.ImageTag(artifact))
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return "", nil
	case err != nil:
		return "", failure.Registry(err)
	}
	raw, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return "", failure.Registry(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil || m.Annotations[push.AnnotationImageOf] != artifact.String() {
		// Not a view of this artifact, whoever pushed it: none to report.
		return "", nil
	}
	return desc.Digest.String(), nil
}

// revisionOf turns the OCI revision annotation back into a status
// sourceRevision: a Claim's "main@sha1:<commit>" is the commit.
func revisionOf(annotation string) string {
	if _, commit, ok := strings.Cut(annotation, "@sha1:"); ok {
		return commit
	}
	return strings.TrimPrefix(annotation, "sha1:")
}
