package procnode

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxTerminationMessage is the kubelet's limit per container.
const maxTerminationMessage = 4096

// podRun is a pod's running (or finished) processes.
type podRun struct {
	pod     *corev1.Pod
	started metav1.Time
	procs   []*containerRun
	done    chan struct{}
	// ip is the pod's address (network.go).
	ip string
	// notReady holds the containers whose readiness probe has not passed
	// (probe.go).
	readyMu  sync.Mutex
	notReady map[string]bool
}

type containerRun struct {
	spec     containerSpec
	cmd      *exec.Cmd
	pid      int
	started  metav1.Time
	finished metav1.Time
	exitCode int32
	reason   string
	message  string
	done     chan struct{}
}

// launch starts every container of pod as a host process. A container
// whose binary cannot start ends at once with reason StartError, as with a
// real runtime.
func (n *Node) launch(pod *corev1.Pod, specs []containerSpec, ip string) *podRun {
	r := &podRun{pod: pod.DeepCopy(), started: metav1.Now(), done: make(chan struct{}), ip: ip, notReady: map[string]bool{}}
	probed := false
	for _, c := range pod.Spec.Containers {
		if c.ReadinessProbe != nil {
			r.notReady[c.Name], probed = true, true
		}
	}
	for _, s := range specs {
		c := &containerRun{spec: s, done: make(chan struct{}), started: metav1.Now()}
		r.procs = append(r.procs, c)
		c.start()
	}
	n.mu.Lock()
	n.runs[pod.UID] = r
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for _, c := range r.procs {
			<-c.done
		}
		close(r.done)
		n.finished(pod, r)
	}()
	if probed {
		n.wg.Add(1)
		go n.probe(r, ip)
	}
	return r
}

func (c *containerRun) start() {
	fail := func(err error) {
		c.exitCode, c.reason, c.message = 128, "StartError", err.Error()
		c.finished = metav1.Now()
		close(c.done)
	}
	_ = os.Remove(c.spec.termPath)
	log, err := os.OpenFile(c.spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fail(err)
		return
	}
	cmd := exec.Command(c.spec.argv[0], c.spec.argv[1:]...)
	cmd.Env, cmd.Dir = c.spec.env, c.spec.dir
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a kill reaches anything it forks; and the
	// parent-death signal so a crashed node leaves no orphan behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		fail(err)
		return
	}
	c.cmd, c.pid = cmd, cmd.Process.Pid
	go func() {
		defer close(c.done)
		err := cmd.Wait()
		log.Close()
		c.finished = metav1.Now()
		c.exitCode = exitCode(cmd.ProcessState, err)
		c.reason = "Completed"
		if c.exitCode != 0 {
			c.reason = "Error"
		}
		c.message = c.terminationMessage()
	}()
}

// kill sends SIGTERM to every container's process group and SIGKILL after
// grace, like the kubelet on pod deletion.
func (r *podRun) kill(grace time.Duration) {
	var wg sync.WaitGroup
	for _, c := range r.procs {
		if c.cmd == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = syscall.Kill(-c.pid, syscall.SIGTERM)
			select {
			case <-c.done:
			case <-time.After(grace):
			}
			_ = syscall.Kill(-c.pid, syscall.SIGKILL)
			<-c.done
		}()
	}
	wg.Wait()
}

func (c *containerRun) terminationMessage() string {
	b, _ := os.ReadFile(c.spec.termPath)
	if len(b) == 0 && c.exitCode != 0 && c.spec.termPolicy == corev1.TerminationMessageFallbackToLogsOnError {
		b = tail(c.spec.logPath, 80, 2048)
	}
	if len(b) > maxTerminationMessage {
		b = b[:maxTerminationMessage]
	}
	return string(b)
}

func (r *podRun) summary() string {
	var parts []string
	for _, c := range r.procs {
		parts = append(parts, fmt.Sprintf("%s exit %d (%s) in %s", c.spec.name, c.exitCode, c.reason, c.finished.Sub(c.started.Time).Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

func exitCode(st *os.ProcessState, err error) int32 {
	if st == nil {
		return 128
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(st.ExitCode())
}

// tail returns at most the last lines and bytes of a log file.
func tail(path string, lines, max int) []byte {
	b, _ := os.ReadFile(path)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	s := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(s) > lines {
		s = s[len(s)-lines:]
	}
	return []byte(strings.Join(s, "\n"))
}
