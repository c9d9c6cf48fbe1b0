package main

import (
	"context"

	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/jobs/result"
	"github.com/packline/packline/jobs/spec"
)

// EnvRenderMaxBytes overrides the limit on the rendered manifests' size.
const EnvRenderMaxBytes = "PACKLINE_RENDER_MAX_BYTES"

// EnvTemplateAuthDir overrides spec.TemplateAuthDir, where a private
// template's Secret is mounted (the sandbox's process node maps it to a
// local folder).
const EnvTemplateAuthDir = "PACKLINE_TEMPLATE_AUTH_DIR"

func init() { commands["claim"] = runClaim }

// runClaim renders the Claim's template with its values, exposure and
// profile, and pushes the manifests as one OCI artifact.
func runClaim(ctx context.Context) result.Result {
	var c spec.Claim
	if err := spec.Load(&c); err != nil {
		return failure.ToResult(failure.Permanent(failure.ReasonInvalidSpec, err))
	}
	res, err := render.Run(ctx, c, render.Options{
		WorkDir: envOr(EnvWorkspace, spec.WorkspaceDir),
		AuthDir: envOr(EnvTemplateAuthDir, spec.TemplateAuthDir),
		Limits:  render.Limits{MaxOutputBytes: int(envInt(EnvRenderMaxBytes))},
	})
	if err != nil {
		return failure.ToResult(err)
	}
	return res
}
