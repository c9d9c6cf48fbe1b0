package main

import (
	"context"

	"github.com/packline/packline/test/sandbox"
)

const claimsMissing = "no template repository server is wired into the sandbox yet"

// templateRepo serves the fixture template repository for the Claim
// samples; "" skips them.
func templateRepo(s *sandbox.Sandbox) (url string, closeFn func(), err error) {
	return "", func() {}, nil
}

func prepareNamespace(ctx context.Context, s *sandbox.Sandbox) error { return nil }
