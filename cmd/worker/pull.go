package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/pull"
	jobsregistry "github.com/packline/packline/jobs/registry"
)

func init() { commands["pull"] = runPull }

// runPull is `worker pull [--plain-http] [--insecure] REPOSITORY@DIGEST
// DIR`: the init container of an Artifact binding mounted with InitPull,
// for runtimes that cannot mount an OCI image as a volume. It unpacks the
// manifest's layers into DIR (an emptyDir the workload container mounts),
// verifying every blob against its digest and keeping file modes.
// Credentials, if any, come from $DOCKER_CONFIG (the pod's first
// imagePullSecret, mounted by the render).
//
// DIR is emptied first: an init container that failed half-way and runs
// again finds its own partial files in the emptyDir, and nothing half
// verified is ever left for the workload.
func runPull(ctx context.Context) workerv1.Result {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	plainHTTP := fs.Bool("plain-http", false, "reach the registry over plain HTTP")
	insecure := fs.Bool("insecure", false, "skip TLS verification")
	if err := fs.Parse(subArgs); err != nil || fs.NArg() != 2 {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec,
			fmt.Errorf("usage: worker pull [--plain-http] [--insecure] REPOSITORY@sha256:DIGEST DIR (got %q)", subArgs)))
	}
	refArg, dir := fs.Arg(0), fs.Arg(1)
	ref, err := registry.ParseReference(refArg)
	if err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("reference %q: %w", refArg, err)))
	}
	d, err := digest.Parse(ref.Reference)
	if err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec,
			fmt.Errorf("reference %q: pull needs a digest (repository@sha256:…), not a tag", refArg)))
	}
	repo, err := jobsregistry.Repository(ref.Registry+"/"+ref.Repository, jobsregistry.Options{PlainHTTP: *plainHTTP, Insecure: *insecure})
	if err != nil {
		return failure.ToResult(err)
	}
	if err := emptyDir(dir); err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("pull folder %s: %w", dir, err)))
	}
	n, err := pull.Pull(ctx, repo, d, dir, nil)
	if err != nil {
		_ = emptyDir(dir)
		return failure.ToResult(pullFailure(err))
	}
	fmt.Fprintf(os.Stderr, "worker pull: %s: %d layers into %s, every digest verified\n", refArg, n, dir)
	return workerv1.Result{Digest: d.String(), Reference: refArg}
}

// pullFailure names a blob whose bytes do not match its digest as
// ChecksumMismatch (retried: the bytes may have broken on the way) and
// leaves registry errors to failure.Registry.
func pullFailure(err error) error {
	var fe *failure.Error
	switch {
	case errors.As(err, &fe):
		return err
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData):
		return failure.Retryable(workerv1.ReasonChecksum, err)
	}
	return failure.Registry(err)
}

// emptyDir makes dir, or removes what is in it (not dir itself: it is a
// mount point).
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
