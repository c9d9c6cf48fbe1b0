package sign

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

func pkcs8PEM(t *testing.T, k any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPKCS8, Bytes: der})
}

// encryptedPEM writes a key the way cosign generate-key-pair does.
func encryptedPEM(t *testing.T, typ string, k any, password string) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encrypted.EncryptWithCustomKDFParameters(der, []byte(password), encrypted.Legacy)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: enc})
}

func TestLoadKey(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(p256)

	for _, tc := range []struct {
		name     string
		pem      []byte
		password string
		wantErr  error
		// wantMsg is a part of the message the user reads.
		wantMsg string
	}{
		{name: "sigstore encrypted", pem: encryptedPEM(t, pemSigstoreEncrypted, p256, "s3cret"), password: "s3cret"},
		{name: "legacy cosign encrypted", pem: encryptedPEM(t, pemCosignEncrypted, p256, "s3cret"), password: "s3cret"},
		{name: "encrypted with empty password", pem: encryptedPEM(t, pemSigstoreEncrypted, p256, ""), password: ""},
		{name: "plain PKCS#8", pem: pkcs8PEM(t, p256)},
		{name: "wrong password", pem: encryptedPEM(t, pemSigstoreEncrypted, p256, "s3cret"), password: "nope", wantErr: ErrWrongPassword, wantMsg: "cannot decrypt cosign.key with cosign.password"},
		{name: "password missing", pem: encryptedPEM(t, pemSigstoreEncrypted, p256, "s3cret"), wantErr: ErrWrongPassword, wantMsg: "no cosign.password"},
		{name: "empty key", pem: nil, wantErr: ErrKeyMissing, wantMsg: "no cosign.key"},
		{name: "not PEM", pem: []byte("hello"), wantErr: ErrKeyUnsupported, wantMsg: "not PEM"},
		{name: "SEC1 EC key", pem: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), wantErr: ErrKeyUnsupported, wantMsg: `PEM block "EC PRIVATE KEY"`},
		{name: "RSA", pem: pkcs8PEM(t, rsaKey), wantErr: ErrKeyUnsupported, wantMsg: "*rsa.PrivateKey"},
		{name: "Ed25519", pem: pkcs8PEM(t, edKey), wantErr: ErrKeyUnsupported, wantMsg: "ed25519"},
		{name: "P-384", pem: pkcs8PEM(t, p384), wantErr: ErrKeyUnsupported, wantMsg: "P-384"},
		{name: "encrypted RSA", pem: encryptedPEM(t, pemSigstoreEncrypted, rsaKey, "pw"), password: "pw", wantErr: ErrKeyUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := LoadKey(tc.pem, []byte(tc.password))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("LoadKey: %v", err)
				}
				if k.Curve != elliptic.P256() {
					t.Errorf("curve %s", k.Curve.Params().Name)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("message %q does not say %q", err, tc.wantMsg)
			}
			// No key material in the message, whatever went wrong.
			if strings.Contains(err.Error(), "BEGIN") || strings.Contains(err.Error(), tc.password+"\x00") {
				t.Errorf("message %q holds key material", err)
			}
		})
	}
}
