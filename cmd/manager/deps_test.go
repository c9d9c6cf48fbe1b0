package main

import (
	"os/exec"
	"strings"
	"testing"
)

// sharedLeaves are the only jobs/ packages the manager may link: pure
// rules both sides apply (URL redaction, the image reference check), with
// no worker code and no oras-go under them. Everything else the manager
// needs from the worker is the contract in api/worker/v1.
var sharedLeaves = map[string]bool{
	"github.com/packline/packline/api/redact":   true,
	"github.com/packline/packline/api/imageref": true,
}

// TestManagerLinksNoWorkerCode keeps the controller↔worker boundary: the
// manager talks to the worker only through api/worker/v1, so it links
// neither the worker (cmd/worker, jobs/…) nor oras-go, which only the
// worker uses to reach registries. The rules both sides apply (URL
// redaction, the image reference check) live under api/.
func TestManagerLinksNoWorkerCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	if bad := forbiddenDeps(deps); len(bad) > 0 {
		t.Errorf("the manager links worker code; reach it through api/worker/v1 instead:\n  %s", strings.Join(bad, "\n  "))
	}
}

// forbiddenDeps returns the packages of deps the manager must not link.
func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, p := range deps {
		switch {
		case strings.HasPrefix(p, "oras.land/oras-go"),
			p == "github.com/packline/packline/cmd/worker",
			strings.HasPrefix(p, "github.com/packline/packline/cmd/worker/"),
			strings.HasPrefix(p, "github.com/packline/packline/jobs/"):
			bad = append(bad, p)
		}
	}
	return bad
}

func TestForbiddenDeps(t *testing.T) {
	got := forbiddenDeps([]string{
		"fmt",
		"oras.land/oras-go/v2/registry/remote/auth",
		"github.com/packline/packline/api/worker/v1",
		"github.com/packline/packline/jobs/failure",
		"github.com/packline/packline/jobs/redact",
		"github.com/packline/packline/api/redact",
		"github.com/packline/packline/cmd/worker",
		"github.com/packline/packline/cmd/workerish",
	})
	want := []string{
		"oras.land/oras-go/v2/registry/remote/auth",
		"github.com/packline/packline/jobs/failure",
		"github.com/packline/packline/jobs/redact",
		"github.com/packline/packline/cmd/worker",
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("forbiddenDeps = %v, want %v", got, want)
	}
}
