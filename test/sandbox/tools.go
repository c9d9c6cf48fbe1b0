package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot walks up from the working directory to packline's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/packline/packline\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the packline repository")
		}
		dir = parent
	}
}

// Defaults fills in the binaries Options needs: the Kubernetes assets from
// KUBEBUILDER_ASSETS or test/tools/k8s-assets.sh, the registry from
// PACKLINE_REGISTRY_BIN or test/tools/registry.sh (both cached builds), and,
// unless given, the manager and worker built from this checkout into binDir.
func Defaults(o *Options, binDir string) error {
	var err error
	if o.RepoRoot == "" {
		if o.RepoRoot, err = RepoRoot(); err != nil {
			return err
		}
	}
	if o.Assets == "" {
		if o.Assets = os.Getenv("KUBEBUILDER_ASSETS"); o.Assets == "" {
			if o.Assets, err = script(o.RepoRoot, "k8s-assets.sh"); err != nil {
				return err
			}
		}
	}
	if o.RegistryBin == "" {
		if o.RegistryBin = os.Getenv("PACKLINE_REGISTRY_BIN"); o.RegistryBin == "" {
			if o.RegistryBin, err = script(o.RepoRoot, "registry.sh"); err != nil {
				return err
			}
		}
	}
	if o.FluxDir == "" {
		if o.FluxDir = os.Getenv("PACKLINE_FLUX_DIR"); o.FluxDir == "" {
			if o.FluxDir, err = script(o.RepoRoot, "flux.sh"); err != nil {
				return err
			}
		}
	}
	if o.Node == NodeReal {
		if err := realNodeDefaults(o); err != nil {
			return err
		}
	}
	if o.ManagerBin == "" || o.WorkerBin == "" {
		if err := Build(o.RepoRoot, binDir); err != nil {
			return err
		}
		o.ManagerBin, o.WorkerBin = filepath.Join(binDir, "manager"), filepath.Join(binDir, "worker")
	}
	return nil
}

// Build compiles cmd/manager and cmd/worker into dir (the Go build cache
// makes a repeat cheap).
func Build(root, dir string) error {
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/manager", "./cmd/worker")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build manager and worker: %v\n%s", err, out)
	}
	return nil
}

func script(root, name string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "test", "tools", name))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("test/tools/%s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// realNodeDefaults fills in the real node's binaries from the environment
// (PACKLINE_KUBE_NODE_DIR, PACKLINE_CONTAINERD_DIR, PACKLINE_CNI_DIR,
// PACKLINE_RUNC_BIN, as `make test-node` sets them) or the cached builds of
// test/tools.
func realNodeDefaults(o *Options) error {
	a := &o.RealNode
	for _, f := range []struct {
		field       *string
		env, script string
	}{
		{&a.KubeDir, "PACKLINE_KUBE_NODE_DIR", "kube-node.sh"},
		{&a.ContainerdDir, "PACKLINE_CONTAINERD_DIR", "containerd.sh"},
		{&a.CNIDir, "PACKLINE_CNI_DIR", "cni.sh"},
		{&a.Runc, "PACKLINE_RUNC_BIN", "runc.sh"},
	} {
		if *f.field != "" {
			continue
		}
		if *f.field = os.Getenv(f.env); *f.field != "" {
			continue
		}
		var err error
		if *f.field, err = script(o.RepoRoot, f.script); err != nil {
			return err
		}
	}
	return nil
}
