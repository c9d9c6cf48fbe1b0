package sandbox

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// FluxNamespace is where the sandbox's Flux controllers run (their events
// and leases; they watch every namespace).
const FluxNamespace = "flux-system"

// startFlux installs Flux's CRDs and runs source-controller and
// kustomize-controller as processes (Options.FluxDir, from
// test/tools/flux.sh). They run as cluster admins, as Flux is installed;
// kustomize-controller impersonates a Kustomization's serviceAccountName,
// so what it applies for a Claim is bounded by the tenant's own rights.
func (s *Sandbox) startFlux() error {
	s.step("Flux source-controller and kustomize-controller")
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(s.o.FluxDir, "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing Flux CRDs: %w", err)
	}
	kc, err := s.cp.writeKubeconfig("flux", "flux", []string{"system:masters"})
	if err != nil {
		return err
	}
	storage, err := freePort()
	if err != nil {
		return err
	}
	storageDir := filepath.Join(s.Dir, "flux-storage")
	if err := os.MkdirAll(storageDir, 0o755); err != nil {
		return err
	}
	start := func(name string, args ...string) error {
		log, err := openLog(filepath.Join(s.logs, name+".log"))
		if err != nil {
			return err
		}
		health, err := freePort()
		if err != nil {
			return err
		}
		args = append(args, "--metrics-addr=0", "--health-addr=127.0.0.1:"+strconv.Itoa(health),
			"--events-addr=", "--watch-all-namespaces=true", "--log-level=debug")
		env := append(os.Environ(), "KUBECONFIG="+kc, "RUNTIME_NAMESPACE="+FluxNamespace)
		p, err := startProc(name, log, env, filepath.Join(s.o.FluxDir, name), args...)
		if err != nil {
			return err
		}
		url := "http://127.0.0.1:" + strconv.Itoa(health) + "/readyz"
		if err := waitFor(p, 60*time.Second, func() error { return httpOK(http.DefaultClient, url) }); err != nil {
			p.stop(time.Second)
			return fmt.Errorf("%s: %w (see %s)", name, err, filepath.Join(s.logs, name+".log"))
		}
		s.flux = append(s.flux, p)
		return nil
	}
	if err := start("source-controller",
		"--storage-path="+storageDir,
		"--storage-addr=127.0.0.1:"+strconv.Itoa(storage),
		"--storage-adv-addr=127.0.0.1:"+strconv.Itoa(storage)); err != nil {
		return err
	}
	return start("kustomize-controller")
}

// stopFlux ends the Flux controllers.
func (s *Sandbox) stopFlux() {
	for _, p := range s.flux {
		p.stop(5 * time.Second)
	}
	s.flux = nil
}
