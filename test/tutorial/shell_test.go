package tutorial

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestShell: the tutorial's shell keeps variables and the folder between
// commands like a terminal, reports each command's own exit code (a
// failing command is caught, `!` inverts it, a pipeline fails when any
// part does), reads heredocs, keeps output without a final newline, and
// gives up on a command that outlives its deadline.
func TestShell(t *testing.T) {
	sh, err := startShell(t.TempDir(), os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	defer sh.close()
	for _, tc := range []struct {
		cmd  string
		out  string
		code int
	}{
		{cmd: "dir=$(mktemp -d) && cd \"$dir\" && export GREETING=hello", out: "", code: 0},
		{cmd: `test "$PWD" = "$dir" && echo "$GREETING"`, out: "hello", code: 0},
		{cmd: "false", out: "", code: 1},
		{cmd: "! false", out: "", code: 0},
		{cmd: "exit_code() { return 3; }; exit_code", out: "", code: 3},
		{cmd: "false | cat", out: "", code: 1},
		{cmd: "echo to-stderr >&2", out: "to-stderr", code: 0},
		{cmd: "printf 'no newline'", out: "no newline", code: 0},
		{cmd: "cat <<'EOF'\na: $GREETING\n\nb\nEOF", out: "a: $GREETING\n\nb", code: 0},
		{cmd: "kubectl-does-not-exist 2>&1 | sed 's/.*: //'", out: "command not found", code: 127},
	} {
		out, code, err := sh.run(tc.cmd, time.Minute)
		if err != nil {
			t.Fatalf("%q: %v", tc.cmd, err)
		}
		if out != tc.out || code != tc.code {
			t.Errorf("%q: got %q exit %d, want %q exit %d", tc.cmd, out, code, tc.out, tc.code)
		}
	}
	if _, _, err := sh.run("sleep 30", 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("a command past its deadline: err %v, want still running", err)
	}
}

// TestBackground: a background command is ready when its output matches,
// fails when it exits first, and stops on SIGINT as Ctrl-C stops it.
func TestBackground(t *testing.T) {
	logf := func(string, ...any) {}
	bg, err := startBackground(t.TempDir(), os.Environ(), "trap 'echo interrupted; exit 0' INT; echo starting; echo 'sandbox: running'; while :; do sleep 0.1; done",
		regexp.MustCompile(`sandbox: running`), time.Minute, logf)
	if err != nil {
		t.Fatal(err)
	}
	if !bg.stop(time.Minute) {
		t.Error("did not stop on SIGINT")
	}
	if !strings.Contains(bg.output(), "interrupted") {
		t.Errorf("output %q: the command did not see SIGINT", bg.output())
	}
	_, err = startBackground(t.TempDir(), os.Environ(), "echo oops; exit 2", regexp.MustCompile(`never`), time.Minute, logf)
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "oops") {
		t.Errorf("a command that exits before it is ready: err %v", err)
	}
}
