package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// runCommand runs `worker <command>` in-process with doc as its spec, in a
// fresh workspace, and returns the exit code and the parsed termination
// message.
func runCommand(t *testing.T, command string, doc any) (int, workerv1.Result) {
	t.Helper()
	encoded, err := workerv1.EncodeSpec(doc)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "termination-log")
	t.Setenv(workerv1.EnvSpec, encoded)
	t.Setenv(EnvTerminationLog, log)
	t.Setenv(EnvWorkspace, t.TempDir())
	code := run([]string{command})
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("no termination message: %v", err)
	}
	res, err := workerv1.ParseResult(b)
	if err != nil {
		t.Fatalf("termination message %s: %v", b, err)
	}
	return code, res
}

func runWorker(t *testing.T, a workerv1.Artifact) (int, workerv1.Result) {
	t.Helper()
	return runCommand(t, "artifact", a)
}

func runClaimWorker(t *testing.T, c workerv1.Claim) (int, workerv1.Result) {
	t.Helper()
	t.Setenv(EnvSourceAuthDir, filepath.Join(t.TempDir(), "no-auth"))
	return runCommand(t, "claim", c)
}

func runDeleteWorker(t *testing.T, d workerv1.Delete) (int, workerv1.Result) {
	t.Helper()
	return runCommand(t, "delete", d)
}

// pushedManifest fetches and decodes the manifest at ref (a tag or a
// digest) in repo.
func pushedManifest(t *testing.T, repo oras.ReadOnlyTarget, ref string) ocispec.Manifest {
	t.Helper()
	_, b, err := oras.FetchBytes(t.Context(), repo, ref, oras.DefaultFetchBytesOptions)
	if err != nil {
		t.Fatalf("fetching manifest %s: %v", ref, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest %s: %v", ref, err)
	}
	return m
}
