package admission

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
)

// ClientAuth is who may call the webhook server.
type ClientAuth struct {
	// CAFile holds the CA (PEM, one or more certificates) that issued the
	// API server's webhook client certificate (the kubeconfig its
	// AdmissionConfiguration names; see docs/operations/install.md). It is read again when
	// it changes, as a ConfigMap volume does.
	CAFile string
	// Names, when set, are the subject common names or DNS names one of
	// which the client certificate must carry: with a CA that also issues
	// other clients' certificates, only the API server's is taken.
	Names []string
}

// ServerTLS is the webhook server's TLS: TLS 1.2 or later, HTTP/1.1 only
// (Kubebuilder's scaffold turns HTTP/2 off since the HTTP/2 stream
// cancellation and rapid-reset CVEs; the API server speaks HTTP/1.1 to
// webhooks anyway), and, with a client CA, the API server's client
// certificate required: without it, anyone who reaches the port could ask
// the mutating webhook to seal any user's request.
func ServerTLS(auth *ClientAuth) (func(*tls.Config), error) {
	var pool *caPool
	if auth != nil {
		if auth.CAFile == "" {
			return nil, errors.New("no client CA file")
		}
		pool = &caPool{file: auth.CAFile}
		if _, err := pool.get(); err != nil {
			return nil, err
		}
	}
	return func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		c.NextProtos = []string{"http/1.1"}
		if pool == nil {
			return
		}
		base := c
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			p, err := pool.get()
			if err != nil {
				return nil, err
			}
			cc := base.Clone()
			cc.GetConfigForClient = nil
			cc.ClientCAs = p
			cc.ClientAuth = tls.RequireAndVerifyClientCert
			if len(auth.Names) > 0 {
				cc.VerifyConnection = func(cs tls.ConnectionState) error {
					leaf := cs.PeerCertificates[0]
					if slices.Contains(auth.Names, leaf.Subject.CommonName) || slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(auth.Names, n) }) {
						return nil
					}
					return fmt.Errorf("client certificate %q is not one of the allowed webhook clients", leaf.Subject.CommonName)
				}
			}
			return cc, nil
		}
	}, nil
}

// caPool is a CA file, parsed again whenever its content changes.
type caPool struct {
	file string
	mu   sync.Mutex
	raw  []byte
	pool *x509.CertPool
}

func (p *caPool) get() (*x509.CertPool, error) {
	b, err := os.ReadFile(p.file)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.pool != nil {
			return p.pool, nil // a volume being swapped: keep the last one
		}
		return nil, fmt.Errorf("webhook client CA: %w", err)
	}
	if p.pool != nil && bytes.Equal(b, p.raw) {
		return p.pool, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		if p.pool != nil {
			return p.pool, nil
		}
		return nil, fmt.Errorf("webhook client CA %s holds no PEM certificate", p.file)
	}
	p.raw, p.pool = b, pool
	return pool, nil
}
