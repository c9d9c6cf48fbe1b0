package main

import (
	"context"
	"path/filepath"

	"github.com/packline/packline/test/sandbox"
)

// templateRepo commits test/fixtures/templates into a Git repository and
// serves it, standing in for the platform team's template repo that the
// ClaimTemplate sample names.
func templateRepo(s *sandbox.Sandbox, root string) (url string, closeFn func(), err error) {
	g, err := sandbox.ServeGitRepo(filepath.Join(s.Dir, "git"), "workloads", filepath.Join(root, "test", "fixtures", "templates"))
	if err != nil {
		return "", nil, err
	}
	return g.URL, func() { _ = g.Close() }, nil
}

// prepareNamespace labels "default" as a tenant namespace, which the
// ClaimTemplate sample's access rule requires.
func prepareNamespace(ctx context.Context, s *sandbox.Sandbox) error {
	return s.LabelNamespace(ctx, "default", sandbox.TenantLabels)
}
