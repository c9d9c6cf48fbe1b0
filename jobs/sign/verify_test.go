package sign

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/content/memory"
)

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pubPEM(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Verify accepts what Attach writes with the same key, and names what
// fails otherwise: another key, another digest, a missing attestation.
func TestVerifyReadsWhatAttachWrites(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	key := newKey(t)
	subject := digest.FromString("the artifact's manifest")
	st := testStatement(t, "registry.example/team/model", subject)
	if _, err := NewSigner(key).Attach(ctx, store, "registry.example/team/model", subject, st); err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(pubPEM(t, key))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(ctx, store, subject, pub)
	if err != nil {
		t.Fatal(err)
	}
	want := Verified{Signatures: 1, BuildType: "https://packline.dev/buildtypes/test/v1", BuilderID: "https://packline.dev/worker"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	other, _ := LoadPublicKey(pubPEM(t, newKey(t)))
	_, err = Verify(ctx, store, subject, other)
	for _, part := range []string{"signature: no valid signature of " + subject.String() + " by this key", "not signed by this key", "provenance: no valid SLSA provenance"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("another key: want %q in %v", part, err)
		}
	}

	unsigned := digest.FromString("something else")
	_, err = Verify(ctx, store, unsigned, pub)
	if err == nil || !strings.Contains(err.Error(), SignatureTag(unsigned)+": not found in the repository (not signed?)") {
		t.Errorf("unsigned digest: %v", err)
	}
}

func TestLoadPublicKeyRefusesPrivateKeys(t *testing.T) {
	_, err := LoadPublicKey([]byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"))
	if diff := cmp.Diff(`not a PEM "PUBLIC KEY" block (cosign.pub)`, errString(err)); diff != "" {
		t.Error(diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
