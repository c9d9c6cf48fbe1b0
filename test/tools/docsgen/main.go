// Command docsgen writes the reference pages generated from the code:
// docs/reference/reasons.md (workerv1.Reasons and the controllers' reason
// constants), labels-annotations.md and metrics.md (constants and
// prometheus.New… calls) and flags.md (the manager's -help). Run from the
// repository root; make docs runs it, make verify-generated checks the
// result is committed.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"

	"github.com/packline/packline/test/docs"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "docsgen:", err)
		os.Exit(1)
	}
}

func run() error {
	reasons, err := docs.ReasonsMarkdown(".")
	if err != nil {
		return err
	}
	if err := os.WriteFile(docs.ReasonsFile, []byte(reasons), 0o644); err != nil {
		return err
	}
	labels, err := docs.LabelsMarkdown(".")
	if err != nil {
		return err
	}
	if err := os.WriteFile(docs.LabelsFile, []byte(labels), 0o644); err != nil {
		return err
	}
	metrics, err := docs.MetricsMarkdown(".")
	if err != nil {
		return err
	}
	if err := os.WriteFile(docs.MetricsFile, []byte(metrics), 0o644); err != nil {
		return err
	}
	usage, err := managerUsage()
	if err != nil {
		return err
	}
	return os.WriteFile(docs.FlagsFile, []byte(docs.FlagsMarkdown(usage)), 0o644)
}

// managerUsage runs the manager with -help, with no environment a default
// reads ($POD_NAMESPACE), so the page does not depend on the shell.
func managerUsage() (string, error) {
	cmd := exec.Command("go", "run", "./cmd/manager", "-help")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = withoutVar(os.Environ(), "POD_NAMESPACE")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go run ./cmd/manager -help: %w\n%s", err, out.String())
	}
	return out.String(), nil
}

func withoutVar(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if !bytes.HasPrefix([]byte(e), []byte(name+"=")) {
			out = append(out, e)
		}
	}
	return out
}
