package sandbox

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StartManager runs the packline manager binary with the ClusterRole's
// identity, serving the admission webhooks (unless Options.NoWebhooks), with
// Options.ManagerArgs and then extra flags. It returns once the manager is
// ready, which includes serving the webhooks with its own certificate. It
// may be called again after KillManager or StopManager, as a restarted pod.
func (s *Sandbox) StartManager(extra ...string) error {
	s.step("packline manager")
	log, err := openLog(filepath.Join(s.logs, "manager.log"))
	if err != nil {
		return err
	}
	probe, err := freePort()
	if err != nil {
		return err
	}
	args := append([]string{
		"--worker-image=" + s.workerImage,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
	}, s.webhookArgs()...)
	if s.o.MultiKueue {
		args = append(args, "--job-managed-by="+MultiKueueJobManagedBy)
	}
	args = append(args, append(append([]string{}, s.o.ManagerArgs...), extra...)...)
	env := append(os.Environ(), "KUBECONFIG="+s.managerKC)
	p, err := startProc("manager", log, env, s.o.ManagerBin, args...)
	if err != nil {
		return err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(probe) + "/readyz"
	if err := waitFor(p, 60*time.Second, func() error { return httpOK(http.DefaultClient, url) }); err != nil {
		p.stop(time.Second)
		return fmt.Errorf("%w (see %s)%s", err, filepath.Join(s.logs, "manager.log"), lastError(filepath.Join(s.logs, "manager.log")))
	}
	s.manager = p
	return nil
}

// KillManager ends the manager with SIGKILL, as a crash or an evicted pod.
func (s *Sandbox) KillManager() {
	if s.manager != nil {
		s.manager.kill()
		s.manager = nil
	}
}

// StopManager ends the manager gracefully.
func (s *Sandbox) StopManager() {
	if s.manager != nil {
		s.manager.stop(10 * time.Second)
		s.manager = nil
	}
}

// ManagerMemory returns the manager's resident set size now and at its
// peak, in bytes, from /proc.
func (s *Sandbox) ManagerMemory() (rss, peak int64, err error) {
	if s.manager == nil {
		return 0, 0, fmt.Errorf("manager is not running")
	}
	return procMemory(s.manager.Pid())
}

// Instance is a second manager, for one --instance, that serves no
// webhooks (the main manager does). Benchmarks use it to time a manager
// from its start against resources that already exist.
type Instance struct{ p *proc }

// StartInstance runs another manager with --instance=name, the manager's
// identity and Options.ManagerArgs, and extra flags. It returns once the
// manager is ready; its log is manager-<name>.log.
func (s *Sandbox) StartInstance(name string, extra ...string) (*Instance, error) {
	log, err := openLog(filepath.Join(s.logs, "manager-"+name+".log"))
	if err != nil {
		return nil, err
	}
	probe, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--worker-image=" + s.workerImage, "--metrics-bind-address=0", "--enable-webhooks=false",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe), "--instance=" + name,
	}
	args = append(args, s.verifyArgs()...)
	args = append(args, append(append([]string{}, s.o.ManagerArgs...), extra...)...)
	p, err := startProc("manager-"+name, log, append(os.Environ(), "KUBECONFIG="+s.managerKC), s.o.ManagerBin, args...)
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(probe) + "/readyz"
	if err := waitFor(p, 60*time.Second, func() error { return httpOK(http.DefaultClient, url) }); err != nil {
		p.stop(time.Second)
		return nil, fmt.Errorf("%w (see %s)%s", err, filepath.Join(s.logs, "manager-"+name+".log"), lastError(filepath.Join(s.logs, "manager-"+name+".log")))
	}
	return &Instance{p: p}, nil
}

// Memory returns the instance's resident set size now and at its peak.
func (i *Instance) Memory() (rss, peak int64, err error) { return procMemory(i.p.Pid()) }

// Stop ends the instance gracefully.
func (i *Instance) Stop() { i.p.stop(10 * time.Second) }

func procMemory(pid int) (rss, peak int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak, sc.Err()
}

// lastError is the manager's last words, for a start that failed: the log
// stays on the machine that ran the test, and CI shows only the test's
// output. The manager's fatal error is its last line ("packline manager:
// ..."); the lines before it give the context.
func lastError(log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "; its log ends:\n\t" + strings.Join(lines, "\n\t")
}
