// Package registry connects the worker to an OCI registry with oras-go:
// credentials from DOCKER_CONFIG (a mounted dockerconfigjson Secret), plain
// HTTP, an extra CA bundle, and retries on transient failures.
package registry

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/netx"
)

// Options says how to reach one registry.
type Options struct {
	PlainHTTP bool
	Insecure  bool
	// CAFile is a PEM bundle trusted in addition to the system pool.
	CAFile string
	// DockerConfigDir holds config.json; empty means $DOCKER_CONFIG, and no
	// credentials when that is unset too.
	DockerConfigDir string
}

// TargetOptions returns the Options for a push target.
func TargetOptions(t workerv1.Target) Options {
	return Options{PlainHTTP: t.PlainHTTP, Insecure: t.Insecure, CAFile: t.CAFile}
}

// Repository returns an oras-go repository client for ref ("host/path").
func Repository(ref string, o Options) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("repository %q: %w", ref, err))
	}
	repo.PlainHTTP = o.PlainHTTP
	client, err := Client(o)
	if err != nil {
		return nil, err
	}
	repo.Client = client
	return repo, nil
}

// Client returns an auth client with retries, TLS settings and credentials.
func Client(o Options) (*auth.Client, error) {
	// netx: a registry that stops sending or receiving mid-transfer fails
	// after netx.Idle without progress.
	tr := netx.Transport()
	// Large layers upload concurrently; keep enough idle connections per host.
	tr.MaxIdleConnsPerHost = 16
	if o.Insecure || o.CAFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.Insecure} //nolint:gosec // user opted in
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("reading CA bundle: %w", err))
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("CA bundle %s holds no PEM certificate", o.CAFile))
			}
			cfg.RootCAs = pool
		}
		tr.TLSClientConfig = cfg
	}
	client := &auth.Client{
		Client: &http.Client{Transport: retry.NewTransport(tr)},
		Cache:  auth.NewCache(),
		Header: http.Header{"User-Agent": {"packline-worker"}},
	}
	dir := o.DockerConfigDir
	if dir == "" {
		dir = os.Getenv(workerv1.EnvDockerConfig)
	}
	if dir != "" {
		path := filepath.Join(dir, "config.json")
		if _, err := os.Stat(path); err == nil {
			store, err := credentials.NewStore(path, credentials.StoreOptions{})
			if err != nil {
				return nil, failure.Permanent(workerv1.ReasonRegistryAuth, fmt.Errorf("reading registry credentials: %w", err))
			}
			client.Credential = credentials.Credential(store)
		}
	}
	return client, nil
}
