package sandbox

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRealNodeConfigs(t *testing.T) {
	p := realNodePaths{dir: "/s/realnode", cniBin: "/c/cni", runcBin: "/usr/sbin/runc", sandboxImage: "10.88.0.1:5000/packline/pause:sandbox", kubeletPort: 1, healthzPort: 2}

	kubelet := kubeletConfig(p, "/s/pki/ca.crt", "/s/realnode/resolv.conf")
	for _, want := range []string{
		"cgroupDriver: cgroupfs",
		"failCgroupV1: false", // kubelet 1.35+ refuses cgroup v1 without it
		"containerRuntimeEndpoint: unix:///s/realnode/containerd/containerd.sock",
		"address: " + BridgeGateway,
		"readOnlyPort: 0",
		"resolvConf: /s/realnode/resolv.conf",
		"podLogsDir: /s/realnode/pod-logs",
	} {
		if !strings.Contains(kubelet, want+"\n") {
			t.Errorf("kubelet config lacks %q:\n%s", want, kubelet)
		}
	}

	cd := containerdConfig(p)
	for _, want := range []string{
		`root = "/s/realnode/containerd/root"`,
		`SystemdCgroup = false`,
		`BinaryName = "/usr/sbin/runc"`,
		`bin_dirs = ["/c/cni"]`,
		`sandbox = "10.88.0.1:5000/packline/pause:sandbox"`,
		`config_path = "/s/realnode/containerd/certs.d"`,
		`netns_mounts_under_state_dir = true`,
	} {
		if !strings.Contains(cd, want+"\n") {
			t.Errorf("containerd config lacks %q:\n%s", want, cd)
		}
	}

	if got, want := registryHosts("10.88.0.1:5000"), "server = \"http://10.88.0.1:5000\"\n"; !strings.HasPrefix(got, want) {
		t.Errorf("hosts.toml = %q, want it to start %q", got, want)
	}

	// The pod network must not let a pod leave the bridge: no gateway
	// role for the plugin (no default route, no IP forwarding), no masquerade.
	var cni struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(cniConfig("/s/ipam")), &cni); err != nil {
		t.Fatal(err)
	}
	bridge := cni.Plugins[0]
	if bridge["type"] != "bridge" || bridge["isGateway"] != false || bridge["ipMasq"] != false || bridge["isDefaultGateway"] != nil {
		t.Errorf("bridge plugin = %v", bridge)
	}
	ipam := bridge["ipam"].(map[string]any)
	if ipam["routes"] != nil || ipam["dataDir"] != "/s/ipam" {
		t.Errorf("ipam = %v: want no routes and the sandbox's data dir", ipam)
	}
}
