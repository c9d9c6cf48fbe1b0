package render

import (
	"context"
	"errors"
	"fmt"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2"

	"github.com/packline/packline/api/redact"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/jobs/render/archive"
	"github.com/packline/packline/jobs/render/publish"
	"github.com/packline/packline/jobs/render/source"
)

// Options are the worker's environment.
type Options struct {
	// WorkDir holds the clone (the workspace volume in a pod).
	WorkDir string
	// AuthDir holds a private template's Secret's files (the mounted
	// spec.source.secretRef); read only when the template has one.
	AuthDir string
	Limits  Limits
	// Target, when set, replaces the registry client built from the spec
	// (tests use an in-process registry).
	Target oras.Target
	// Step, when set, is told each step as it starts (clone, render,
	// push): the worker prints it as a progress line (workerv1.Progress).
	Step func(workerv1.Step)
}

func (o Options) step(s workerv1.Step) {
	if o.Step != nil {
		o.Step(s)
	}
}

// Run renders c and pushes it. The result is for the termination message;
// errors are classified (see package failure) for main to report.
func Run(ctx context.Context, c workerv1.Claim, o Options) (workerv1.Result, error) {
	if c.Target.Repository == "" && !c.Check {
		return workerv1.Result{}, failure.Permanent(workerv1.ReasonInvalidSpec, errors.New("target repository is empty"))
	}
	tag := c.Target.Tag
	if tag == "" {
		tag = "latest"
	}
	auth, err := templateAuth(c.Template, o.AuthDir)
	if err != nil {
		return workerv1.Result{}, err
	}
	o.step(workerv1.StepClone)
	rev, snap, err := source.Fetch(ctx, source.Options{
		URL: c.Template.Source.URL, Ref: c.Template.Source.Ref,
		Dir: cloneDir(o.WorkDir), Auth: auth,
	})
	if err != nil {
		return workerv1.Result{}, templateAuthError(c.Template, err)
	}
	o.step(workerv1.StepRender)
	m, files, err := manifests(c, snap, o.Limits)
	if err != nil {
		return workerv1.Result{}, err
	}
	layer, err := archive.Write(files)
	if err != nil {
		return workerv1.Result{}, failure.Permanent(workerv1.ReasonRenderFailed, err)
	}
	if c.Check {
		return workerv1.Result{Check: true, Digest: digest.FromBytes(layer).String(), Size: int64(len(layer)),
			SourceRevision: rev.Commit, Kinds: kindsOf(m)}, nil
	}
	art := publish.Artifact{
		Layer:    layer,
		Source:   redact.Public(c.Template.Source.URL),
		Revision: Revision(rev),
		Created:  rev.Time,
	}

	o.step(workerv1.StepPush)
	dst := o.Target
	if dst == nil {
		repo, err := registry.Repository(c.Target.Repository, registry.TargetOptions(c.Target))
		if err != nil {
			return workerv1.Result{}, err
		}
		dst = repo
	}
	desc, err := publish.Push(ctx, art, dst, tag)
	if err != nil {
		return workerv1.Result{}, failure.Registry(fmt.Errorf("pushing %s:%s: %w", c.Target.Repository, tag, err))
	}
	return workerv1.Result{
		Digest:         desc.Digest.String(),
		Reference:      c.Target.Repository + "@" + desc.Digest.String(),
		MediaType:      desc.MediaType,
		ArtifactType:   publish.ConfigMediaType,
		Size:           desc.Size,
		SourceRevision: rev.Commit,
		Tag:            tag,
	}, nil
}

// Revision is the OCI revision annotation in Flux's format:
// "<branch or tag>@sha1:<commit>", or "sha1:<commit>" when the template
// pins a commit.
func Revision(rev source.Revision) string {
	if rev.IsSHA {
		return "sha1:" + rev.Commit
	}
	return rev.Ref + "@sha1:" + rev.Commit
}
