package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/packline/packline/test/loopback"
)

// proc is one child process of the sandbox. It runs in its own process group
// so that Stop reaches anything it forks, and with a parent-death signal so
// that a sandbox killed with SIGKILL still leaves nothing behind.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	once sync.Once
}

func startProc(name string, log io.Writer, env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process id.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (p *proc) Exited() <-chan struct{} { return p.done }

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	p.once.Do(func() {
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
		// The group may still hold children even when the leader is gone.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	})
}

// kill ends the process group at once, as a crash would.
func (p *proc) kill() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}

// freePort returns a loopback port that was free a moment ago (see
// loopback.FreePort). Callers that lose the race retry with another port.
func freePort() (int, error) { return loopback.FreePort() }

// waitFor polls check until it succeeds, the process exits, or timeout.
func waitFor(p *proc, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s: %w", p.name, timeout, last)
}

func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

var errNotReady = errors.New("not ready")
