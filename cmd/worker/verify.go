package main

import (
	"context"
	"errors"
	"fmt"

	"oras.land/oras-go/v2/errdef"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

func init() { commands["verify"] = runVerify }

// runVerify checks, with the push credentials, that the pushed manifest is
// still in the registry and its tag still points at it: two HEAD requests,
// nothing downloaded.
func runVerify(ctx context.Context) workerv1.Result {
	var v workerv1.Verify
	if err := workerv1.LoadSpec(&v); err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, err))
	}
	r, err := verifyPushed(ctx, v)
	if err != nil {
		return failure.ToResult(err)
	}
	return r
}

func verifyPushed(ctx context.Context, v workerv1.Verify) (workerv1.Result, error) {
	repoRef, dgst, repo, err := pushedRepository(v.Reference, v.Target)
	if err != nil {
		return workerv1.Result{}, err
	}
	desc, err := repo.Resolve(ctx, dgst)
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return workerv1.Result{}, failure.Permanent(workerv1.ReasonArtifactMissing, fmt.Errorf("%s is no longer in the registry", v.Reference))
	case err != nil:
		return workerv1.Result{}, failure.Registry(err)
	}
	if tag := v.Target.Tag; tag != "" {
		cur, err := repo.Resolve(ctx, tag)
		switch {
		case errors.Is(err, errdef.ErrNotFound):
			return workerv1.Result{}, failure.Permanent(workerv1.ReasonTagMoved, fmt.Errorf("tag %s of %s no longer exists; it pointed at %s", tag, repoRef, dgst))
		case err != nil:
			return workerv1.Result{}, failure.Registry(err)
		case cur.Digest.String() != dgst:
			return workerv1.Result{}, failure.Permanent(workerv1.ReasonTagMoved, fmt.Errorf("tag %s of %s now points at %s, not the pushed %s", tag, repoRef, cur.Digest, dgst))
		}
	}
	return workerv1.Result{Digest: dgst, Reference: v.Reference, MediaType: desc.MediaType, Size: desc.Size, Tag: v.Target.Tag}, nil
}
