// Package webhookclient gives a test kube-apiserver the client certificate
// it presents to admission webhooks, as the README tells admins to: a CA of
// its own, a certificate it issued, a kubeconfig naming it for every
// webhook, and the AdmissionConfiguration (--admission-control-config-file)
// that points both webhook admission plugins at that kubeconfig. The
// webhook server then takes only clients of that CA (--webhook-client-ca).
package webhookclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// ClientName is the common name of the API server's webhook client
// certificate (--webhook-client-names).
const ClientName = "kube-apiserver-webhook-client"

// Files are what Write wrote.
type Files struct {
	// CA is the PEM CA file for --webhook-client-ca.
	CA string
	// CAPEM is its content.
	CAPEM []byte
	// AdmissionConfig is the file for --admission-control-config-file.
	AdmissionConfig string
}

// Write writes the CA, the client certificate, its kubeconfig and the
// AdmissionConfiguration into dir.
func Write(dir string) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "packline-webhook-client-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Files{}, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ClientName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Files{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, "webhook-client-ca.crt"), AdmissionConfig: filepath.Join(dir, "admission-config.yaml"),
		CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	certFile, keyFile := filepath.Join(dir, "webhook-client.crt"), filepath.Join(dir, "webhook-client.key")
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	// "*" is the user for every webhook; a real install names the
	// webhook Service's host, packline-webhook-service.packline-system.svc.
	files := map[string]string{
		f.CA:     string(f.CAPEM),
		certFile: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyFile:  string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})),
		kubeconfig: fmt.Sprintf(`apiVersion: v1
kind: Config
users:
  - name: "*"
    user:
      client-certificate: %s
      client-key: %s
`, certFile, keyFile),
		f.AdmissionConfig: fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]s
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]s
`, kubeconfig),
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}
