package sign

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/test/cosigntest"
	"github.com/packline/packline/test/regtest"
)

// pushArtifact pushes a one-layer artifact tagged tag, with data as its layer.
func pushArtifact(t *testing.T, repo *remote.Repository, tag, data string) digest.Digest {
	t.Helper()
	ctx := t.Context()
	layer := []byte(data)
	ld := ocispec.Descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: digest.FromBytes(layer), Size: int64(len(layer))}
	if err := repo.Push(ctx, ld, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	cd := ocispec.DescriptorEmptyJSON
	if err := repo.Push(ctx, cd, strings.NewReader("{}")); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: "application/vnd.example.test", Config: cd, Layers: []ocispec.Descriptor{ld}})
	desc, err := oras.TagBytes(ctx, repo, ocispec.MediaTypeImageManifest, m, tag)
	if err != nil {
		t.Fatal(err)
	}
	return desc.Digest
}

func testStatement(t *testing.T, repository string, d digest.Digest) []byte {
	t.Helper()
	b, err := Statement(repository, d, Provenance{
		BuildType: "https://packline.dev/buildtypes/test/v1", BuilderID: "https://packline.dev/worker",
		External: map[string]any{"test": true}, StartedOn: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttachVerifiesWithCosign signs with a key made by the real cosign
// CLI and checks the result with the real CLI: the signature, the SLSA
// attestation, and that a tag moved to other content no longer verifies.
func TestAttachVerifiesWithCosign(t *testing.T) {
	host := regtest.Start(t)
	kp := cosigntest.GenerateKeyPair(t, "correct horse")
	pemBytes, err := os.ReadFile(kp.Private())
	if err != nil {
		t.Fatal(err)
	}
	key, err := LoadKey(pemBytes, []byte(kp.Password))
	if err != nil {
		t.Fatalf("loading cosign's own key: %v", err)
	}
	if _, err := LoadKey(pemBytes, []byte("wrong")); err == nil {
		t.Fatal("a wrong password decrypted cosign's key")
	}
	repository := host + "/models/signed"
	repo, err := remote.NewRepository(repository)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	d := pushArtifact(t, repo, "v1", "weights")

	s := NewSigner(key)
	got, err := s.Attach(t.Context(), repo, repository, d, testStatement(t, repository, d))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cosigntest.Verify(t, kp.Public(), repository+"@"+d.String()); err != nil {
		t.Fatalf("cosign verify: %v\n%s", err, out)
	}
	if out, err := cosigntest.Verify(t, kp.Public(), repository+":v1"); err != nil {
		t.Fatalf("cosign verify of the tag: %v\n%s", err, out)
	}
	out, err := cosigntest.VerifyAttestation(t, kp.Public(), repository+"@"+d.String())
	if err != nil {
		t.Fatalf("cosign verify-attestation: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"predicateType":"https://slsa.dev/provenance/v1"`) && !strings.Contains(out, "payload") {
		t.Errorf("verify-attestation printed no statement:\n%s", out)
	}

	// A re-run keeps the signature (same tag, same manifest) and replaces
	// its own attestation rather than piling them up.
	again, err := s.Attach(t.Context(), repo, repository, d, testStatement(t, repository, d))
	if err != nil {
		t.Fatal(err)
	}
	if again.Signature != got.Signature {
		t.Errorf("re-run moved the signature: %s, then %s", got.Signature, again.Signature)
	}
	if n := layerCount(t, repo, AttestationTag(d)); n != 1 {
		t.Errorf("attestation manifest has %d layers after a re-run, want 1", n)
	}

	// Someone else's key: cosign refuses it.
	other := cosigntest.GenerateKeyPair(t, "x")
	if out, err := cosigntest.Verify(t, other.Public(), repository+"@"+d.String()); err == nil {
		t.Fatalf("cosign verify accepted another key:\n%s", out)
	}

	// The tag moved to content nobody signed: verification fails.
	pushArtifact(t, repo, "v1", "tampered weights")
	if out, err := cosigntest.Verify(t, kp.Public(), repository+":v1"); err == nil {
		t.Fatalf("cosign verify accepted a tampered tag:\n%s", out)
	} else if !strings.Contains(out, "no signatures found") && !strings.Contains(out, "no matching signatures") {
		t.Errorf("cosign failed for another reason than a missing signature:\n%s", out)
	}
	if out, err := cosigntest.VerifyAttestation(t, kp.Public(), repository+":v1"); err == nil {
		t.Fatalf("cosign verify-attestation accepted a tampered tag:\n%s", out)
	}
}

// TestAttachKeepsOtherSigners: a signature made by someone else's key on
// the same digest stays next to ours, and both verify.
func TestAttachKeepsOtherSigners(t *testing.T) {
	host := regtest.Start(t)
	repository := host + "/models/cosigned"
	repo, err := remote.NewRepository(repository)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	d := pushArtifact(t, repo, "v1", "weights")

	theirs := cosigntest.GenerateKeyPair(t, "theirs")
	if out, err := cosigntest.Run(t, theirs.Dir, []string{"COSIGN_PASSWORD=theirs"}, "sign", "--key", theirs.Private(),
		"--tlog-upload=false", "--allow-http-registry", "--use-signing-config=false", repository+"@"+d.String()); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	ours := cosigntest.GenerateKeyPair(t, "ours")
	pemBytes, _ := os.ReadFile(ours.Private())
	key, err := LoadKey(pemBytes, []byte(ours.Password))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSigner(key).Attach(context.Background(), repo, repository, d, testStatement(t, repository, d)); err != nil {
		t.Fatal(err)
	}
	for name, kp := range map[string]cosigntest.KeyPair{"theirs": theirs, "ours": ours} {
		if out, err := cosigntest.Verify(t, kp.Public(), repository+"@"+d.String()); err != nil {
			t.Errorf("%s: cosign verify: %v\n%s", name, err, out)
		}
	}
}

func layerCount(t *testing.T, repo *remote.Repository, tag string) int {
	t.Helper()
	m, _, err := fetchManifest(t.Context(), repo, tag)
	if err != nil {
		t.Fatal(err)
	}
	return len(m.Layers)
}
