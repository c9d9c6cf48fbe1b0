// Package tutorial runs every command of docs/tutorials on the demo, as a
// newcomer would type them: `make demo` in a terminal of its own, the rest
// one after another in a second terminal's shell, with a real kubectl and
// the plugin `make demo` built. See test/docs/tutorial.go for how a
// tutorial marks its commands.
package tutorial

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// shell is one bash, fed commands on stdin like a terminal a user pastes
// into: variables, exports and the working folder carry from one command
// to the next. stderr goes to stdout, so output reads as on a terminal.
type shell struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	nonce string
	done  *regexp.Regexp
}

func startShell(dir string, env []string) (*shell, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	nonce := hex.EncodeToString(b)
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &shell{cmd: cmd, in: in, lines: make(chan string, 1024), nonce: nonce,
		done: regexp.MustCompile(`^(.*)__tutorial_done_` + nonce + `_(\d+)__$`)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	// A pipeline fails when any part fails, so `kubectl get … | grep` does
	// not hide a kubectl error.
	if _, err := fmt.Fprintln(in, "set -o pipefail"); err != nil {
		return nil, err
	}
	return s, nil
}

// run sends one command and waits up to timeout for its exit code; out is
// what it printed.
func (s *shell) run(command string, timeout time.Duration) (out string, code int, err error) {
	// The marker follows on a line of its own even when the command's
	// output does not end in a newline; the exit code is the command's.
	if _, err := fmt.Fprintf(s.in, "%s\nprintf '%%s__tutorial_done_%s_%%d__\\n' \"\" $?\n", command, s.nonce); err != nil {
		return "", 0, err
	}
	var b strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return b.String(), 0, fmt.Errorf("the shell exited")
			}
			if m := s.done.FindStringSubmatch(l); m != nil {
				b.WriteString(m[1])
				code, _ := strconv.Atoi(m[2])
				return strings.TrimSuffix(b.String(), "\n"), code, nil
			}
			b.WriteString(l + "\n")
		case <-deadline:
			return b.String(), 0, fmt.Errorf("still running after %s", timeout)
		}
	}
}

func (s *shell) close() {
	_ = s.in.Close()
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// background is a command run as in a terminal of its own (`make demo`):
// its own process group, so that stop sends SIGINT to all of it, as Ctrl-C
// does.
type background struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	exit chan struct{}
}

// startBackground runs command and waits up to timeout for a line of its
// output to match ready.
func startBackground(dir string, env []string, command string, ready *regexp.Regexp, timeout time.Duration, logf func(string, ...any)) (*background, error) {
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", command)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	bg := &background{cmd: cmd, exit: make(chan struct{})}
	isReady := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			l := sc.Text()
			bg.mu.Lock()
			bg.out.WriteString(l + "\n")
			bg.mu.Unlock()
			logf("%s", l)
			if ready.MatchString(l) {
				once.Do(func() { close(isReady) })
			}
		}
		_ = cmd.Wait()
		close(bg.exit)
	}()
	select {
	case <-isReady:
		return bg, nil
	case <-bg.exit:
		return nil, fmt.Errorf("%q exited (%v) before printing a line matching %q:\n%s", command, cmd.ProcessState, ready, bg.output())
	case <-time.After(timeout):
		bg.stop(time.Minute)
		return nil, fmt.Errorf("%q printed no line matching %q within %s:\n%s", command, ready, timeout, bg.output())
	}
}

func (bg *background) output() string {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	return bg.out.String()
}

// stop sends SIGINT to the command's process group, as Ctrl-C in its
// terminal would, and SIGKILL if it has not exited within grace. It
// reports whether it exited on SIGINT.
func (bg *background) stop(grace time.Duration) bool {
	_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-bg.exit:
		return true
	case <-time.After(grace):
		_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGKILL)
		<-bg.exit
		return false
	}
}
