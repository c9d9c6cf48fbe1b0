// Command kubectl-packline is the packline kubectl plugin: `kubectl
// packline catalog|claim|why|rerun|pull|verify|completion`. It talks to the
// cluster with the user's own kubeconfig and rights only: every answer it
// gives is one the user could get with kubectl, put together.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/packline/packline/cmd/kubectl-packline/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := plugin.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
