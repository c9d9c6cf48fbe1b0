// Command kubectl-packline is the packline kubectl plugin: `kubectl
// packline catalog|claim|why|rerun|pull|verify|ui|completion`. It talks to the
// cluster with the user's own kubeconfig and rights only: every answer it
// gives is one the user could get with kubectl, put together.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/packline/packline/cmd/kubectl-packline/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	args := os.Args[1:]
	// Run as kubectl_complete-packline (a symlink to this binary), it
	// answers kubectl's plugin completion.
	if filepath.Base(os.Args[0]) == "kubectl_complete-packline" {
		args = append([]string{plugin.CompleteVerb}, args...)
	}
	code := plugin.Main(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
