package sign

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

// PEM block types of the keys we accept.
const (
	// cosign generate-key-pair writes this since v2 (scrypt + secretbox,
	// the go-securesystemslib "encrypted" format, around PKCS#8).
	pemSigstoreEncrypted = "ENCRYPTED SIGSTORE PRIVATE KEY"
	// Older cosign releases wrote this; same content.
	pemCosignEncrypted = "ENCRYPTED COSIGN PRIVATE KEY"
	// Plain PKCS#8 (openssl genpkey, cosign import-key-pair's input).
	pemPKCS8 = "PRIVATE KEY"
)

// Key errors, for the worker to turn into failure reasons. Their messages
// name what is wrong and never hold key material.
var (
	ErrKeyMissing     = errors.New("signing key is missing")
	ErrWrongPassword  = errors.New("signing key password is wrong")
	ErrKeyUnsupported = errors.New("signing key type is not supported")
)

// LoadKey parses a cosign-encrypted or plain PKCS#8 PEM key and returns the
// ECDSA P-256 key in it. password is used for encrypted keys only (cosign
// allows an empty one).
func LoadKey(pemBytes, password []byte) (*ecdsa.PrivateKey, error) {
	k, err := ParseKey(pemBytes)
	if err != nil {
		return nil, err
	}
	return k.Decrypt(password)
}

// Key is a parsed PEM key, possibly still encrypted.
type Key struct {
	der       []byte
	encrypted bool
}

// ParseKey checks what can be checked without the password: that there
// is a key, that it is PEM, and of a type we read.
func ParseKey(pemBytes []byte) (*Key, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		if len(pemBytes) == 0 {
			return nil, fmt.Errorf("%w: the Secret has no cosign.key, or it is empty", ErrKeyMissing)
		}
		return nil, fmt.Errorf("%w: cosign.key is not PEM (want %q from cosign generate-key-pair, or a PKCS#8 %q)", ErrKeyUnsupported, pemSigstoreEncrypted, pemPKCS8)
	}
	switch block.Type {
	case pemSigstoreEncrypted, pemCosignEncrypted:
		return &Key{der: block.Bytes, encrypted: true}, nil
	case pemPKCS8:
		return &Key{der: block.Bytes}, nil
	}
	return nil, fmt.Errorf("%w: PEM block %q (want %q from cosign generate-key-pair, or a PKCS#8 %q; convert an EC key with openssl pkcs8 -topk8 -nocrypt)",
		ErrKeyUnsupported, block.Type, pemSigstoreEncrypted, pemPKCS8)
}

// Encrypted reports whether Decrypt needs the password (and runs scrypt,
// about 0.2 s of CPU with cosign's parameters).
func (k *Key) Encrypted() bool { return k.encrypted }

// Decrypt returns the ECDSA P-256 key.
func (k *Key) Decrypt(password []byte) (*ecdsa.PrivateKey, error) {
	der := k.der
	if k.encrypted {
		plain, err := encrypted.Decrypt(der, password)
		if err != nil {
			// The secretbox fails to open on a wrong passphrase; a
			// corrupt envelope fails in JSON decoding first.
			if len(password) == 0 {
				return nil, fmt.Errorf("%w: the key is encrypted and the Secret has no cosign.password (or it is empty)", ErrWrongPassword)
			}
			return nil, fmt.Errorf("%w: cannot decrypt cosign.key with cosign.password", ErrWrongPassword)
		}
		der = plain
	}
	pk, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PKCS#8 private key", ErrKeyUnsupported)
	}
	ec, ok := pk.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %T; only ECDSA P-256 keys are accepted", ErrKeyUnsupported, pk)
	}
	if ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: ECDSA on %s; only P-256 is accepted", ErrKeyUnsupported, ec.Curve.Params().Name)
	}
	return ec, nil
}
