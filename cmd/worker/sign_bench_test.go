package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/registry"
	"github.com/packline/packline/test/benchenv"
	"github.com/packline/packline/test/regtest"
)

// BenchmarkSigningOverhead measures, against the real registry and in the
// same run, what signing adds to an Artifact run: reading the key and
// waiting for its decryption (cosign's scrypt parameters; it runs during
// the push), building the SLSA statement, signing, and pushing the .sig and
// .att manifests; as a share of the unsigned pack+push of the same
// artifact (the part of the run that is the same signed or not).
//
// Two sizes: a small artifact (64 KiB) and PACKLINE_BENCH_BYTES (default
// 1 GiB, the push benchmark's size). Target: at most 5% for 1 GiB. Run
// with -benchtime=1x; each iteration pushes to fresh repositories.
func BenchmarkSigningOverhead(b *testing.B) {
	large := benchenv.Bytes(b, 1<<30)
	host := regtest.Start(b)
	keyDirBench(b)
	b.Setenv(workerv1.EnvWorkerImage, "ghcr.io/packline/worker:bench")
	sizes := []struct {
		name  string
		bytes int64
	}{{"small", 64 << 10}, {"large", large}}
	roots := map[string]string{}
	for _, s := range sizes {
		roots[s.name] = b.TempDir()
		writeShards(b, roots[s.name], s.bytes, 8)
	}
	push := map[string]time.Duration{}
	key := map[string]time.Duration{}
	sign := map[string]time.Duration{}
	ctx := context.Background()
	for i := range b.N {
		for _, s := range sizes {
			b.Setenv(EnvSourceVolumeDir, roots[s.name])
			b.Setenv(EnvWorkspace, b.TempDir())
			a := workerv1.Artifact{Source: v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: "models"}},
				Format:  v1alpha1.FormatModelKit,
				Target:  workerv1.Target{Repository: fmt.Sprintf("%s/bench/%s-%d", host, s.name, i), Tag: "v1", PlainHTTP: true},
				Signing: &workerv1.Signing{KeyField: "spec.signing.keySecretRef", Resource: workerv1.Resource{Kind: "Artifact", Namespace: "bench", Name: s.name, Generation: 1}}}
			repo, err := registry.Repository(a.Target.Repository, registry.TargetOptions(a.Target))
			if err != nil {
				b.Fatal(err)
			}
			// As in a run: the key is checked first and decrypted while
			// the push runs; the time the run waits for it counts.
			start := time.Now()
			signCtx, waitSigner, err := startSigner(ctx, a.Signing)
			if err != nil {
				b.Fatal(err)
			}
			key[s.name] += time.Since(start)

			// The push waits for the key before its manifest: that wait
			// counts as signing, the rest as the push.
			var keyWait time.Duration
			start = time.Now()
			res, err := artifact(signCtx, a, repo, func() error {
				t := time.Now()
				_, err := waitSigner()
				keyWait = time.Since(t)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			push[s.name] += time.Since(start) - keyWait
			key[s.name] += keyWait
			signer, _ := waitSigner()

			start = time.Now()
			signed := signPushed(ctx, signer, repo, a.Target.Repository, res, artifactProvenance(a, res.SourceRevision, "", start))
			if signed.Failed() {
				b.Fatal(signed.Error.Message)
			}
			sign[s.name] += time.Since(start)
		}
	}
	for _, s := range sizes {
		b.Logf("%s: reading and decrypting the key %s, signing and attaching %s", s.name, key[s.name]/time.Duration(b.N), sign[s.name]/time.Duration(b.N))
		sign[s.name] += key[s.name]
		share := sign[s.name].Seconds() / push[s.name].Seconds()
		b.ReportMetric(100*share, s.name+"_sign/push_%")
		b.ReportMetric(float64(sign[s.name].Milliseconds())/float64(b.N), s.name+"_sign_ms")
		b.Logf("%s (%d bytes): unsigned push %s, signing and provenance %s = %.1f%% of the push (target for 1 GiB: ≤5%%)",
			s.name, s.bytes, push[s.name]/time.Duration(b.N), sign[s.name]/time.Duration(b.N), 100*share)
	}
}

// keyDirBench writes an encrypted P-256 key as cosign generate-key-pair
// does (go-securesystemslib's default scrypt parameters, cosign's).
func keyDirBench(b *testing.B) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	enc, err := encrypted.Encrypt(der, []byte("bench"))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, workerv1.SigningKeyFile), pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED SIGSTORE PRIVATE KEY", Bytes: enc}), 0o400)
	os.WriteFile(filepath.Join(dir, workerv1.SigningPasswordFile), []byte("bench"), 0o400)
	b.Setenv(EnvSigningKeyDir, dir)
}

// writeShards writes n files of incompressible data totalling size bytes.
func writeShards(b *testing.B, root string, size int64, n int) {
	block := make([]byte, 1<<20)
	if _, err := rand.Read(block); err != nil {
		b.Fatal(err)
	}
	per := size / int64(n)
	for i := range n {
		f, err := os.Create(filepath.Join(root, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)))
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < per; off += int64(len(block)) {
			binary.LittleEndian.PutUint64(block, uint64(i)<<40|uint64(off))
			if _, err := f.Write(block[:min(int64(len(block)), per-off)]); err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
}
