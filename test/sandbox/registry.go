package sandbox

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/packline/packline/test/registryconf"
)

// Registry is the distribution registry on loopback, as a library usable
// outside tests (test/regtest is the testing.TB flavour).
type Registry struct {
	// Host is "127.0.0.1:<port>"; it stays the same across Stop/Start.
	Host string

	bin, config string
	log         io.Writer
	mu          sync.Mutex
	p           *proc
}

// RegistryOptions configure StartRegistry.
type RegistryOptions struct {
	// Dir holds the storage and config.
	Dir string
	// Bin is the registry binary.
	Bin string
	// Users turns on htpasswd basic auth with these user → password pairs.
	Users map[string]string
	// IP is the address to listen on; 127.0.0.1 when empty (the real node's
	// pods reach the registry on the bridge's gateway address instead).
	IP  string
	Log io.Writer
}

// StartRegistry runs a registry with o on a free port.
func StartRegistry(o RegistryOptions) (*Registry, error) {
	if err := os.MkdirAll(filepath.Join(o.Dir, "storage"), 0o755); err != nil {
		return nil, err
	}
	r := &Registry{bin: o.Bin, log: o.Log}
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		ip := o.IP
		if ip == "" {
			ip = "127.0.0.1"
		}
		r.Host = net.JoinHostPort(ip, strconv.Itoa(port))
		if r.config, err = registryconf.Write(o.Dir, filepath.Join(o.Dir, "storage"), r.Host, "sandbox", o.Users); err != nil {
			return nil, err
		}
		if last = r.Start(); last == nil {
			return r, nil
		}
	}
	return nil, last
}

// Start starts a stopped registry on the same address and storage.
func (r *Registry) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		return nil
	}
	p, err := startProc("registry", r.log, nil, r.bin, "serve", r.config)
	if err != nil {
		return err
	}
	probe := &http.Client{Timeout: time.Second}
	err = waitFor(p, 30*time.Second, func() error {
		resp, err := probe.Get("http://" + r.Host + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("/v2/: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		p.stop(time.Second)
		return err
	}
	r.p = p
	return nil
}

// Stop ends the registry; its storage is kept for Start.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		r.p.stop(5 * time.Second)
		r.p = nil
	}
}
