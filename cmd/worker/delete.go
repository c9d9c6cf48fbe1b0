package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/push"
	"github.com/packline/packline/jobs/registry"
)

func init() { commands["delete"] = runDelete }

// runDelete removes the pushed artifact for deletionPolicy Delete.
func runDelete(ctx context.Context) workerv1.Result {
	var d workerv1.Delete
	if err := workerv1.LoadSpec(&d); err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, err))
	}
	r, err := deleteArtifact(ctx, d)
	if err != nil {
		return failure.ToResult(err)
	}
	return r
}

func deleteArtifact(ctx context.Context, d workerv1.Delete) (workerv1.Result, error) {
	_, dgst, repo, err := pushedRepository(d.Reference, d.Target)
	if err != nil {
		return workerv1.Result{}, err
	}
	done := workerv1.Result{Digest: dgst, Reference: d.Reference, Tag: d.Target.Tag}
	if d.Target.Tag != "" {
		cur, err := repo.Resolve(ctx, d.Target.Tag)
		switch {
		case errors.Is(err, errdef.ErrNotFound):
			log.Printf("tag %s is gone already", d.Target.Tag)
		case err != nil:
			return workerv1.Result{}, failure.Registry(err)
		case cur.Digest.String() != dgst:
			log.Printf("tag %s now points at %s, not %s: leaving it", d.Target.Tag, cur.Digest, dgst)
			return done, nil
		}
	}
	desc, err := repo.Resolve(ctx, dgst)
	if errors.Is(err, errdef.ErrNotFound) {
		log.Printf("%s is gone already", d.Reference)
		return done, nil
	}
	if err != nil {
		return workerv1.Result{}, failure.Registry(err)
	}
	if err := repo.Delete(ctx, desc); err != nil && !errors.Is(err, errdef.ErrNotFound) {
		return workerv1.Result{}, failure.Registry(err)
	}
	log.Printf("deleted %s", d.Reference)
	deleteSide(ctx, repo, push.KeysTag(desc.Digest), "layer keys")
	deleteSide(ctx, repo, push.ImageTag(desc.Digest), "image view")
	return done, nil
}

// deleteSide removes a manifest kept beside a deleted one under tag: its
// layer keys (push.KeysTag; a volume's) or its image view
// (push.ImageTag), which nothing reads any more. Leaving one costs only a
// tag (the image view's layers are the deleted manifest's), so a failure
// is logged, not returned.
func deleteSide(ctx context.Context, repo *remote.Repository, tag, what string) {
	side, err := repo.Resolve(ctx, tag)
	if err != nil {
		return // none, or the registry will not say
	}
	if err := repo.Delete(ctx, side); err != nil && !errors.Is(err, errdef.ErrNotFound) {
		log.Printf("%s %s not deleted: %v", what, tag, err)
	}
}

// pushedRepository splits a status reference ("<repository>@sha256:…") and
// opens its repository with the target's credentials.
func pushedRepository(reference string, t workerv1.Target) (repoRef, digest string, repo *remote.Repository, err error) {
	repoRef, digest, ok := strings.Cut(reference, "@")
	if !ok || !strings.HasPrefix(digest, "sha256:") {
		return "", "", nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("reference %q is not <repository>@sha256:…", reference))
	}
	repo, err = registry.Repository(repoRef, registry.TargetOptions(t))
	return repoRef, digest, repo, err
}
