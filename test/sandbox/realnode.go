package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeReal selects the real node: containerd with runc, the CNI bridge,
// kube-scheduler and a kubelet, instead of the process node.
const NodeReal = "real"

// RealNodeAssets are the binaries the real node runs, from
// test/tools/{kube-node,containerd,cni,runc}.sh.
type RealNodeAssets struct {
	// KubeDir holds kubelet and kube-scheduler.
	KubeDir string
	// ContainerdDir holds containerd and containerd-shim-runc-v2.
	ContainerdDir string
	// CNIDir holds the bridge, host-local, loopback and portmap plugins.
	CNIDir string
	// Runc is the runc binary.
	Runc string
}

// realNode is the running real node.
type realNode struct {
	paths                          realNodePaths
	lock                           *os.File
	containerd, scheduler, kubelet *proc
	stopVolumes                    context.CancelFunc
	// api relays the bridge's gateway address to the API server.
	api *apiForward
	// shimSockets were in /run/containerd/s before containerd started: the
	// shims' sockets there that are not are this node's, removed at Stop
	// (a killed shim leaves its socket; the lock makes this node the only
	// one of the sandbox's on the machine).
	shimSockets map[string]bool
	// sysctls the kubelet sets at its start (vm.overcommit_memory,
	// kernel.panic, ...), as they were before it: restored once the node is
	// up, since the host is shared.
	sysctls map[string]string
}

// kubeletSysctls are the kernel settings the kubelet writes at start
// (pkg/kubelet/cm setupKernelTunables).
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// realNodeLock makes real-node sandboxes on one machine take turns: they
// would share the bridge and its subnet.
const realNodeLock = "/tmp/packline-real-node.lock"

// prepareRealNode takes the machine-wide lock and makes the bridge, before
// the registry and the fixtures listen on its gateway address.
func (s *Sandbox) prepareRealNode() error {
	a := s.o.RealNode
	for _, b := range []string{filepath.Join(a.KubeDir, "kubelet"), filepath.Join(a.KubeDir, "kube-scheduler"),
		filepath.Join(a.ContainerdDir, "containerd"), filepath.Join(a.ContainerdDir, "containerd-shim-runc-v2"),
		filepath.Join(a.CNIDir, "bridge"), a.Runc} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("real node: %w (run make node-assets)", err)
		}
	}
	n := &realNode{paths: realNodePaths{
		dir: filepath.Join(s.Dir, "realnode"), containerdBin: filepath.Join(a.ContainerdDir, "containerd"),
		cniBin: a.CNIDir, runcBin: a.Runc,
	}}
	s.real = n
	var err error
	if n.lock, err = os.OpenFile(realNodeLock, os.O_CREATE|os.O_RDWR, 0o600); err != nil {
		return err
	}
	s.step("real node: waiting for " + realNodeLock)
	if err := syscall.Flock(int(n.lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	s.step("real node: bridge " + BridgeName + " " + BridgeGateway + "/" + strconv.Itoa(bridgePrefix))
	// A bridge left by a sandbox that was killed goes first.
	_ = run("ip", "link", "del", BridgeName)
	for _, args := range [][]string{
		{"link", "add", BridgeName, "type", "bridge"},
		{"addr", "add", BridgeGateway + "/" + strconv.Itoa(bridgePrefix), "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
	} {
		if err := run("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// startRealNode pushes the pause and worker images to the registry, then
// starts containerd, kube-scheduler and the kubelet, and waits for the Node
// to be Ready.
func (s *Sandbox) startRealNode(ctx context.Context) error {
	n, p := s.real, &s.real.paths
	for _, d := range []string{p.containerdRoot(), p.containerdState(), p.hostsDir(), p.cniConfDir(), p.cniIPAMDir(), p.kubeletRoot(), p.podLogs()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	s.step("real node: pause and worker images")
	var err error
	if p.sandboxImage, err = pushPauseImage(ctx, s.o.RepoRoot, s.Registry.Host, p.dir); err != nil {
		return err
	}
	if s.o.WorkerImage == "" {
		start := time.Now()
		if s.workerImage, err = pushWorkerImage(ctx, s.o.RepoRoot, s.Registry.Host); err != nil {
			return err
		}
		s.step(fmt.Sprintf("real node: pushed %s in %s", s.workerImage, time.Since(start).Round(time.Millisecond)))
	}
	hosts := filepath.Join(p.hostsDir(), s.Registry.Host)
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(registryHosts(s.Registry.Host)), 0o644); err != nil {
		return err
	}
	others := filepath.Join(p.hostsDir(), "_default")
	if err := os.MkdirAll(others, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(others, "hosts.toml"), []byte(otherRegistries), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.cniConfDir(), "10-packline.conflist"), []byte(cniConfig(p.cniIPAMDir())), 0o644); err != nil {
		return err
	}
	cfg := filepath.Join(p.dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(*p)), 0o644); err != nil {
		return err
	}
	log, err := openLog(filepath.Join(s.logs, "containerd.log"))
	if err != nil {
		return err
	}
	n.shimSockets = listDir(shimSocketDir)
	s.step("real node: containerd")
	// The shim and runc are found on PATH.
	path := "PATH=" + s.o.RealNode.ContainerdDir + ":" + filepath.Dir(p.runcBin) + ":" + os.Getenv("PATH")
	env := append(os.Environ(), path)
	if n.containerd, err = startProc("containerd", log, env, p.containerdBin, "--config", cfg, "--log-level", "info"); err != nil {
		return err
	}
	if err := waitFor(n.containerd, 60*time.Second, func() error {
		_, err := os.Stat(p.containerdSock())
		return err
	}); err != nil {
		return err
	}

	if n.api, err = startAPIForward(s.Config.Host); err != nil {
		return err
	}

	vctx, cancel := context.WithCancel(context.Background())
	n.stopVolumes = cancel
	go provisionVolumes(vctx, s.Kube, filepath.Join(p.dir, "volumes"))

	s.step("real node: kube-scheduler")
	kc, err := s.cp.writeKubeconfig("kube-scheduler", "system:kube-scheduler", []string{"system:masters"})
	if err != nil {
		return err
	}
	slog, err := openLog(filepath.Join(s.logs, "kube-scheduler.log"))
	if err != nil {
		return err
	}
	if n.scheduler, err = startProc("kube-scheduler", slog, nil, filepath.Join(s.o.RealNode.KubeDir, "kube-scheduler"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--secure-port=0", "--v=0"); err != nil {
		return err
	}

	s.step("real node: kubelet")
	for _, port := range []*int{&p.kubeletPort, &p.healthzPort} {
		if *port, err = freePort(); err != nil {
			return err
		}
	}
	nodeKC, err := s.cp.writeKubeconfig("kubelet", "system:node:"+RealNodeName, []string{"system:nodes", "system:masters"})
	if err != nil {
		return err
	}
	ca := filepath.Join(s.Dir, "pki", "ca.crt")
	resolv := filepath.Join(p.dir, "resolv.conf")
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		return err
	}
	kcfg := filepath.Join(p.dir, "kubelet.yaml")
	if err := os.WriteFile(kcfg, []byte(kubeletConfig(*p, ca, resolv)), 0o644); err != nil {
		return err
	}
	n.sysctls = readSysctls()
	klog, err := openLog(filepath.Join(s.logs, "kubelet.log"))
	if err != nil {
		return err
	}
	if n.kubelet, err = startProc("kubelet", klog, env, filepath.Join(s.o.RealNode.KubeDir, "kubelet"),
		"--config="+kcfg, "--kubeconfig="+nodeKC, "--hostname-override="+RealNodeName,
		"--node-ip="+BridgeGateway, "--root-dir="+p.kubeletRoot(), "--v=1"); err != nil {
		return err
	}
	err = waitFor(n.kubelet, 120*time.Second, func() error {
		node := &corev1.Node{}
		if err := s.Client.Get(ctx, client.ObjectKey{Name: RealNodeName}, node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s: %s: %s", RealNodeName, c.Reason, c.Message)
			}
		}
		return errNotReady
	})
	restoreSysctls(n.sysctls)
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, filepath.Join(s.logs, "kubelet.log"))
	}
	return nil
}

// PauseImage is the real node's pod sandbox image, in the sandbox registry:
// a container that only waits, for tests that look into a pod from the host.
func (s *Sandbox) PauseImage() string {
	if s.real == nil {
		return ""
	}
	return s.real.paths.sandboxImage
}

// stopRealNode ends the kubelet and the scheduler, then every container
// (the shims outlive containerd by design, so they are ended by pid), then
// containerd; it unmounts what they mounted under the node's folder,
// removes the kubepods cgroups and the bridge, and releases the lock.
func (s *Sandbox) stopRealNode() {
	n := s.real
	if n == nil {
		return
	}
	if n.stopVolumes != nil {
		n.stopVolumes()
	}
	if n.api != nil {
		n.api.stop()
	}
	for _, p := range []*proc{n.kubelet, n.scheduler} {
		if p != nil {
			p.stop(10 * time.Second)
		}
	}
	killPids(cgroupPids("kubepods"))
	killPids(shimPids(n.paths.containerdSock()))
	if n.containerd != nil {
		n.containerd.stop(10 * time.Second)
	}
	unmountUnder(n.paths.dir)
	if n.shimSockets != nil {
		for name := range listDir(shimSocketDir) {
			if !n.shimSockets[name] {
				_ = os.Remove(filepath.Join(shimSocketDir, name))
			}
		}
	}
	removeCgroups("kubepods")
	_ = run("ip", "link", "del", BridgeName)
	if n.lock != nil {
		_ = syscall.Flock(int(n.lock.Fd()), syscall.LOCK_UN)
		n.lock.Close()
	}
	s.real = nil
}

// shimSocketDir is where containerd's shims listen, whatever its state dir.
const shimSocketDir = "/run/containerd/s"

func listDir(dir string) map[string]bool {
	m := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		m[e.Name()] = true
	}
	return m
}

func run(bin string, args ...string) error {
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func readSysctls() map[string]string {
	m := map[string]string{}
	for _, k := range kubeletSysctls {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			m[k] = strings.TrimSpace(string(b))
		}
	}
	return m
}

func restoreSysctls(m map[string]string) {
	for k, v := range m {
		_ = os.WriteFile("/proc/sys/"+k, []byte(v), 0o644)
	}
}

const cgroupRoot = "/sys/fs/cgroup"

// cgroupPids lists the processes in cgroup name (and below) of every v1
// hierarchy: the pods' containers.
func cgroupPids(name string) []int {
	seen := map[int]bool{}
	ctrls, _ := os.ReadDir(cgroupRoot)
	for _, c := range ctrls {
		_ = filepath.WalkDir(filepath.Join(cgroupRoot, c.Name(), name), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	return out
}

// shimPids are the containerd-shim-runc-v2 processes of this containerd
// (their command line names its socket).
func shimPids(sock string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "containerd-shim-runc-v2" && slicesContains(args, sock) {
			out = append(out, pid)
		}
	}
	return out
}

func slicesContains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func killPids(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Wait (bounded) for them to be gone, so their mounts can go.
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// removeCgroups removes cgroup name and its children in every hierarchy.
func removeCgroups(name string) {
	ctrls, _ := os.ReadDir(cgroupRoot)
	for _, c := range ctrls {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(cgroupRoot, c.Name(), name), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}
