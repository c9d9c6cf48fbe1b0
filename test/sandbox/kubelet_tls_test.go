package sandbox

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The process node's log endpoint lets in the API server's kubelet client
// certificate only: another user of the same CA (a tenant, the manager)
// cannot read any pod's log around RBAC.
func TestKubeletTLSAdmitsOnlyTheAPIServer(t *testing.T) {
	ca, err := newCA()
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{ca: ca}
	cfg, err := cp.kubeletTLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("log")) }))
	srv.TLS = cfg
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	get := func(cn string) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
		if cn != "" {
			certPEM, keyPEM, err := ca.issue(cn, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			c, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			tr.TLSClientConfig.Certificates = []tls.Certificate{c}
		}
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(kubeletClientCN); err != nil {
		t.Errorf("the API server's certificate was refused: %v", err)
	}
	for _, cn := range []string{"", "alice", ManagerUser} {
		if err := get(cn); err == nil {
			t.Errorf("client %q read a log", cn)
		}
	}
}
