package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testCA issues certificates for the client-authentication tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate for cn (client or server use).
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func pemPair(t *testing.T, c tls.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	kb, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TestWebhookServerRequiresClientCertificate runs the manager's webhook
// server as --webhook-client-ca configures it. A caller without a client
// certificate, or with one another CA issued, or one not among
// --webhook-client-names, gets no TLS session, so no seal; the API
// server's certificate does. The server speaks TLS 1.2 or later, and
// HTTP/1.1 only.
func TestWebhookServerRequiresClientCertificate(t *testing.T) {
	dir := t.TempDir()
	serving, clients, other := newTestCA(t, "serving-ca"), newTestCA(t, "webhook-client-ca"), newTestCA(t, "someone-else")
	const dnsName = "packline-webhook-service.packline-system.svc"
	crt, key := pemPair(t, serving.issue(t, dnsName, x509.ExtKeyUsageServerAuth))
	writeFiles(t, dir, map[string][]byte{"tls.crt": crt, "tls.key": key, "client-ca.crt": clients.pem})

	o := defaultWebhookOptions()
	o.Host, o.Port, o.CertDir = "127.0.0.1", freePort(t), dir
	o.ClientCA, o.ClientNames = filepath.Join(dir, "client-ca.crt"), "kube-apiserver-webhook-client, other-name"
	srv, err := o.server()
	if err != nil {
		t.Fatal(err)
	}
	srv.Register("/mutate", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "sealed") }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	NewWithT(t).Eventually(func() error { return srv.StartedChecker()(nil) }).WithTimeout(10 * time.Second).Should(Succeed())

	roots := x509.NewCertPool()
	roots.AddCert(serving.cert)
	call := func(cfg *tls.Config) (string, error) {
		cfg.RootCAs, cfg.ServerName = roots, dnsName
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d/mutate", o.Port), "application/json", strings.NewReader(`{}`))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Proto + " " + string(b), nil
	}
	cases := []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{name: "no client certificate", cfg: &tls.Config{}},
		{name: "a certificate of another CA", cfg: presenting(other.issue(t, "kube-apiserver-webhook-client", x509.ExtKeyUsageClientAuth))},
		{name: "a certificate of the CA for another client", cfg: &tls.Config{Certificates: []tls.Certificate{clients.issue(t, "system:node:worker-1", x509.ExtKeyUsageClientAuth)}}},
		{name: "TLS 1.1", cfg: &tls.Config{MaxVersion: tls.VersionTLS11, Certificates: []tls.Certificate{clients.issue(t, "kube-apiserver-webhook-client", x509.ExtKeyUsageClientAuth)}}},
		{name: "the API server's certificate", ok: true, cfg: &tls.Config{Certificates: []tls.Certificate{clients.issue(t, "kube-apiserver-webhook-client", x509.ExtKeyUsageClientAuth)}}},
		{name: "HTTP/2 asked for, HTTP/1.1 served", ok: true, cfg: &tls.Config{NextProtos: []string{"h2", "http/1.1"},
			Certificates: []tls.Certificate{clients.issue(t, "other-name", x509.ExtKeyUsageClientAuth)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(tc.cfg)
			if !tc.ok {
				if err == nil {
					t.Fatalf("served %q, want the TLS handshake refused", got)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil || got != "HTTP/1.1 sealed" {
				t.Fatalf("got %q, %v; want HTTP/1.1 sealed", got, err)
			}
		})
	}
}

// presenting sends c whatever CAs the server asks for.
func presenting(c tls.Certificate) *tls.Config {
	return &tls.Config{GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }}
}
