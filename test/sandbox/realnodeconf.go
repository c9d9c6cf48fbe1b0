package sandbox

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// The real node's pod network: a bridge the sandbox makes on the host, with
// the gateway address on the host side. Pods get addresses in the subnet
// and a route to the subnet only (no default route), so they reach the
// sandbox's servers on the gateway address and nothing else.
const (
	BridgeName    = "packline0"
	BridgeSubnet  = "10.88.0.0/16"
	BridgeGateway = "10.88.0.1"
	bridgePrefix  = 16
	// RealNodeName is the real node's Node object.
	RealNodeName = "real-node"
)

// realNodePaths is where the real node's parts keep their state, all under
// the sandbox folder, plus the binaries they run.
type realNodePaths struct {
	dir                            string // <sandbox>/realnode
	containerdBin, cniBin, runcBin string
	sandboxImage                   string // the pause image, pinned as "sandbox"
	kubeletPort, healthzPort       int
}

func (p realNodePaths) containerdRoot() string  { return filepath.Join(p.dir, "containerd", "root") }
func (p realNodePaths) containerdState() string { return filepath.Join(p.dir, "containerd", "state") }
func (p realNodePaths) containerdSock() string {
	return filepath.Join(p.dir, "containerd", "containerd.sock")
}
func (p realNodePaths) hostsDir() string   { return filepath.Join(p.dir, "containerd", "certs.d") }
func (p realNodePaths) cniConfDir() string { return filepath.Join(p.dir, "cni", "net.d") }
func (p realNodePaths) cniIPAMDir() string { return filepath.Join(p.dir, "cni", "ipam") }
func (p realNodePaths) kubeletRoot() string {
	return filepath.Join(p.dir, "kubelet")
}
func (p realNodePaths) podLogs() string { return filepath.Join(p.dir, "pod-logs") }

// containerdConfig is containerd 2.x's configuration (version 3): the CRI
// plugin with runc under the cgroupfs driver (the host is cgroup v1, and
// there is no systemd), overlayfs, the CNI folders, registry hosts from
// hostsDir (where the plain-HTTP sandbox registry is declared), the pause
// image, and every path under the sandbox's folder. The shim's sockets are
// the one exception containerd does not let us move (/run/containerd/s).
func containerdConfig(p realNodePaths) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return fmt.Sprintf(`version = 3
root = %[1]s
state = %[2]s
# NRI would listen on /var/run/nri; the sandbox needs none of it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = %[3]s

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]s

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.runtime"]
  # Network namespaces under the state folder, not /var/run/netns.
  netns_mounts_under_state_dir = true
  enable_cdi = false
  # This host withholds CAP_SYS_RESOURCE, so runc cannot set the pause
  # container's oom_score_adj of -998 ("can't get final child's PID from
  # pipe: EOF"); containerd then keeps scores at or above its own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[5]s
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[6]s]
    conf_dir = %[7]s
    max_conf_num = 1

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[8]s
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[9]s
`, q(p.containerdRoot()), q(p.containerdState()), q(p.containerdSock()), q(filepath.Join(p.dir, "containerd", "opt")),
		q(p.runcBin), q(p.cniBin), q(p.cniConfDir()), q(p.sandboxImage), q(p.hostsDir()))
}

// registryHosts is containerd's hosts.toml for the sandbox registry
// (certs.d/<host:port>/hosts.toml): plain HTTP, for pulls.
func registryHosts(host string) string {
	return fmt.Sprintf(`server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
`, host)
}

// otherRegistries is containerd's hosts.toml for every other registry
// (certs.d/_default): a closed loopback port instead of the registry's own
// address, so an image from docker.io or anywhere else fails to pull at
// once, without a DNS lookup or a connection leaving the machine.
const otherRegistries = `server = "http://127.0.0.1:1"

[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
`

// cniConfig is the pod network: bridge with host-local addresses, then
// portmap (a no-op without hostPorts). isGateway is off on purpose: the
// sandbox gives the bridge its gateway address itself, and the plugin then
// neither adds a default route in pods nor turns on IP forwarding on the
// host, so no pod packet can leave the bridge.
func cniConfig(ipamDir string) string {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "packline-sandbox",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      BridgeName,
				"isGateway":   false,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": BridgeSubnet, "gateway": BridgeGateway}}},
					"dataDir": ipamDir,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	return string(b)
}

// kubeletConfig is the KubeletConfiguration: cgroupfs (and failCgroupV1:
// false, since kubelet 1.35 refuses cgroup v1 otherwise, KEP-5573), the
// sandbox's containerd, its own ports on the node address, no cluster DNS
// and an empty resolv.conf (pods have no name server to ask), and eviction
// thresholds low enough that a busy shared disk does not evict the tests'
// pods.
func kubeletConfig(p realNodePaths, caFile, resolvConf string) string {
	lines := []string{
		"apiVersion: kubelet.config.k8s.io/v1beta1",
		"kind: KubeletConfiguration",
		"cgroupDriver: cgroupfs",
		"failCgroupV1: false",
		"failSwapOn: false",
		"containerRuntimeEndpoint: unix://" + p.containerdSock(),
		"address: " + BridgeGateway,
		fmt.Sprintf("port: %d", p.kubeletPort),
		"readOnlyPort: 0",
		"healthzBindAddress: 127.0.0.1",
		fmt.Sprintf("healthzPort: %d", p.healthzPort),
		"authentication:",
		"  anonymous: {enabled: false}",
		"  webhook: {enabled: false}",
		"  x509: {clientCAFile: " + caFile + "}",
		"authorization: {mode: AlwaysAllow}",
		"podLogsDir: " + p.podLogs(),
		"resolvConf: " + resolvConf,
		"serializeImagePulls: false",
		"evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}",
		"imageGCHighThresholdPercent: 100",
		"imageGCLowThresholdPercent: 99",
		// Seconds, not the default minute: tests wait on status changes.
		"syncFrequency: 10s",
		"nodeStatusReportFrequency: 10s",
		"kubeAPIQPS: 50",
		"kubeAPIBurst: 100",
	}
	return strings.Join(lines, "\n") + "\n"
}
