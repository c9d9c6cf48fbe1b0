package main

import (
	"context"
	"fmt"
	"os"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/jobs/render/publish"
	"github.com/packline/packline/jobs/sign"
)

// EnvRenderMaxBytes overrides the limit on the rendered manifests' size.
const EnvRenderMaxBytes = "PACKLINE_RENDER_MAX_BYTES"

// EnvTemplateAuthDir overrides workerv1.TemplateAuthDir, where a private
// template's Secret is mounted (the sandbox's process node maps it to a
// local folder).
const EnvTemplateAuthDir = "PACKLINE_TEMPLATE_AUTH_DIR"

func init() { commands["claim"] = runClaim }

// runClaim renders the Claim's template with its values, exposure and
// profile, pushes the manifests as one OCI artifact, and signs it when
// asked.
func runClaim(ctx context.Context) workerv1.Result {
	started := time.Now().UTC()
	var c workerv1.Claim
	if err := workerv1.LoadSpec(&c); err != nil {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, err))
	}
	if c.Check {
		// A template check renders and pushes nothing, so it needs no
		// target and signs nothing.
		res, err := render.Run(ctx, c, renderOptions(nil))
		if err != nil {
			return failure.ToResult(err)
		}
		return res
	}
	ctx, waitSigner, err := startSigner(ctx, c.Signing)
	if err != nil {
		return failure.ToResult(err)
	}
	if c.Target.Repository == "" {
		return failure.ToResult(failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("target repository is empty")))
	}
	repo, err := registry.Repository(c.Target.Repository, registry.TargetOptions(c.Target))
	if err != nil {
		return failure.ToResult(err)
	}
	var res workerv1.Result
	if pushed := os.Getenv(workerv1.EnvPushedDigest); pushed != "" && c.Signing != nil {
		var desc ocispec.Descriptor
		if desc, err = earlierPush(ctx, repo, c.Target.Repository, pushed); err == nil {
			res = workerv1.Result{Digest: desc.Digest.String(), Reference: c.Target.Repository + "@" + desc.Digest.String(),
				MediaType: desc.MediaType, ArtifactType: publish.ConfigMediaType, Size: desc.Size,
				SourceRevision: os.Getenv(workerv1.EnvPushedRevision), Tag: c.Target.Tag}
		}
	} else if _, err = waitSigner(); err == nil {
		// The render is small and fast: its push waits for the key.
		res, err = render.Run(ctx, c, renderOptions(repo))
	}
	return signedResult(ctx, waitSigner, repo, c.Target.Repository, res, err, func(revision string) sign.Provenance {
		return claimProvenance(c, revision, started)
	})
}

// renderOptions are the worker's render settings; target nil builds none.
func renderOptions(target oras.Target) render.Options {
	o := render.Options{
		WorkDir: envOr(EnvWorkspace, workerv1.WorkspaceDir),
		AuthDir: envOr(EnvTemplateAuthDir, workerv1.TemplateAuthDir),
		Limits:  render.Limits{MaxOutputBytes: int(envInt(EnvRenderMaxBytes))},
		// Each step as a progress line, which the manager shows as the
		// Claim's status.progress.step.
		Step: func(s workerv1.Step) { workerv1.WriteProgress(os.Stderr, workerv1.Progress{Step: s}) },
	}
	if target != nil {
		o.Target = target
	}
	return o
}
