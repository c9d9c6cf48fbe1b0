// Command worker is the program that runs inside a packline Job pod. Its first
// argument selects a subcommand ("artifact", "claim"); each subcommand lives
// in its own file and registers itself in commands from init().
//
// Every run ends with exactly one result written to the termination log, so
// the controller always learns why a pod ended, even on a crash-free failure.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/netx"
)

// EnvTerminationLog overrides workerv1.ResultPath, for tests and the sandbox's
// process node where /dev/termination-log is not writable.
const EnvTerminationLog = "PACKLINE_TERMINATION_LOG"

// EnvIdleTimeout overrides netx.DefaultIdle (a Go duration, "60s"): how
// long a download or upload may make no progress before it fails.
const EnvIdleTimeout = "PACKLINE_IDLE_TIMEOUT"

// commands maps a subcommand name to its run function. A run function never
// exits the process itself: it returns a Result, success or failure.
var commands = map[string]func(ctx context.Context) workerv1.Result{}

// subArgs are the arguments after the subcommand's name; only pull takes
// any (the others read their spec from the environment).
var subArgs []string

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) < 1 || commands[args[0]] == nil {
		fmt.Fprintf(os.Stderr, "usage: worker <%s>\n", strings.Join(names(), "|"))
		return 2
	}
	// SIGTERM is what the kubelet sends on a Job deadline or deletion; the
	// context lets the run stop its transfers and still write a result.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Nothing leaves the worker unredacted: the termination message is
	// redacted by workerv1.Marshal, every log line here.
	registerSecrets()
	defer redactStderr()()
	// Every client the run builds (HTTP, Hugging Face, Git, registries)
	// fails a transfer that makes no progress for the idle timeout.
	idle, _ := time.ParseDuration(os.Getenv(EnvIdleTimeout))
	netx.SetIdle(idle)
	netx.InstallGit()

	subArgs = args[1:]
	res := commands[args[0]](ctx)
	return finish(args[0], res)
}

// finish writes res to the termination log and returns the exit code.
func finish(name string, res workerv1.Result) int {
	path := os.Getenv(EnvTerminationLog)
	if path == "" {
		path = workerv1.ResultPath
	}
	if err := workerv1.WriteResult(path, res); err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: writing result to %s: %v\n", name, path, err)
		return 1
	}
	if res.Failed() {
		fmt.Fprintf(os.Stderr, "worker %s: failed: %s (permanent=%t): %s\n", name, res.Error.Reason, res.Error.Permanent, res.Error.Message)
		return 1
	}
	if name != "pull" {
		fmt.Fprintf(os.Stderr, "worker %s: pushed %s (%d bytes)\n", name, res.Reference, res.Size)
	}
	return 0
}

func names() []string {
	var n []string
	for k := range commands {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
