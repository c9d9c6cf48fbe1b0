package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/sign"
)

// EnvSigningKeyDir overrides workerv1.SigningKeyDir (tests, and the sandbox's
// process node, where pods are local processes).
const EnvSigningKeyDir = "PACKLINE_SIGNING_KEY_DIR"

// startSigner reads the signing key before anything is fetched, so a
// missing key or one of the wrong type fails the run in seconds rather
// than after a 100 GB download. An encrypted key is decrypted in the
// background: cosign's scrypt costs about 0.2 s of CPU (seconds on a busy
// node), which then overlaps with the fetch and push instead of adding to
// the run. A wrong password cancels the returned context, so a download
// stops at once, and wait reports the key, not the cancelled download;
// the push waits for the key before it pushes the manifest, so the tag
// never points at an artifact that could not be signed.
//
// wait returns a nil Signer when the run does not sign.
func startSigner(ctx context.Context, s *workerv1.Signing) (context.Context, func() (*sign.Signer, error), error) {
	none := func() (*sign.Signer, error) { return nil, nil }
	if s == nil {
		return ctx, none, nil
	}
	// The provenance records the binary's digest; hashing it (tens of MB)
	// overlaps with the fetch and push too.
	go executableSHA256()
	dir := envOr(EnvSigningKeyDir, workerv1.SigningKeyDir)
	keyPEM, err := readSmall(filepath.Join(dir, workerv1.SigningKeyFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return ctx, none, failure.Permanent(workerv1.ReasonSigningKeyMissing, fmt.Errorf("%s: reading %s: %v", s.KeyField, workerv1.SigningKeyFile, err))
	}
	key, err := sign.ParseKey(keyPEM)
	if err != nil {
		return ctx, none, keyFailure(s, err)
	}
	password, _ := readSmall(filepath.Join(dir, workerv1.SigningPasswordFile))
	decrypt := func() (*sign.Signer, error) {
		k, err := key.Decrypt(password)
		if trimmed := bytes.TrimRight(password, "\r\n"); errors.Is(err, sign.ErrWrongPassword) && len(trimmed) != len(password) {
			// A password file written with echo ends in a newline that
			// was never part of the password.
			k, err = key.Decrypt(trimmed)
		}
		if err != nil {
			return nil, keyFailure(s, err)
		}
		return sign.NewSigner(k), nil
	}
	if !key.Encrypted() {
		signer, err := decrypt()
		return ctx, func() (*sign.Signer, error) { return signer, err }, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var signer *sign.Signer
	go func() {
		defer close(done)
		if signer, err = decrypt(); err != nil {
			cancel(err)
		}
	}()
	return ctx, func() (*sign.Signer, error) { <-done; return signer, err }, nil
}

// keyFailure turns a key error into its reason, naming the field.
func keyFailure(s *workerv1.Signing, err error) error {
	reason := workerv1.ReasonSigningKeyUnsupported
	switch {
	case errors.Is(err, sign.ErrKeyMissing):
		reason = workerv1.ReasonSigningKeyMissing
	case errors.Is(err, sign.ErrWrongPassword):
		reason = workerv1.ReasonSigningKeyPassword
	}
	return failure.Permanent(reason, fmt.Errorf("%s: %v", s.KeyField, err))
}

// earlierPush resolves the digest that an earlier attempt pushed and then
// failed to sign (workerv1.EnvPushedDigest): this attempt signs it, checked to
// be still there, and pushes nothing again.
func earlierPush(ctx context.Context, repo oras.Target, repository, pushed string) (ocispec.Descriptor, error) {
	desc, err := repo.Resolve(ctx, pushed)
	if err != nil {
		return ocispec.Descriptor{}, failure.Registry(fmt.Errorf("resolving %s@%s, pushed by an earlier attempt: %w", repository, pushed, err))
	}
	fmt.Fprintf(os.Stderr, "%s@%s was pushed by an earlier attempt; signing it only\n", repository, pushed)
	return desc, nil
}

// signedResult ends a run that may sign: a key failure comes first (it may
// be why the push was cancelled), then the push's own error; with no key
// the push's result stands, else what it pushed is signed with prov.
func signedResult(ctx context.Context, waitSigner func() (*sign.Signer, error), t oras.Target, repository string,
	res workerv1.Result, err error, prov func(revision string) sign.Provenance) workerv1.Result {
	signer, kerr := waitSigner()
	if kerr != nil {
		return failure.ToResult(kerr)
	}
	if err != nil {
		return failure.ToResult(err)
	}
	if signer == nil {
		return res
	}
	return signPushed(ctx, signer, t, repository, res, prov(res.SourceRevision))
}

// signPushed signs res's manifest and attaches prov. On failure the result
// still names the pushed artifact (workerv1.Pushed), so the next attempt
// only signs it.
func signPushed(ctx context.Context, signer *sign.Signer, t oras.Target, repository string, res workerv1.Result, prov sign.Provenance) workerv1.Result {
	fail := func(err error) workerv1.Result {
		r := failure.ToResult(err)
		r.Error.Pushed = &workerv1.Pushed{Digest: res.Digest, Reference: res.Reference, SourceRevision: res.SourceRevision}
		return r
	}
	d, err := digest.Parse(res.Digest)
	if err != nil {
		return fail(failure.Permanent(workerv1.ReasonPushFailed, err))
	}
	prov.FinishedOn = time.Now().UTC()
	statement, err := sign.Statement(repository, d, prov)
	if err != nil {
		return fail(failure.Permanent(workerv1.ReasonSignaturePush, err))
	}
	att, err := signer.Attach(ctx, t, repository, d, statement)
	var pe *sign.PushError
	if errors.As(err, &pe) {
		classified := failure.Registry(pe.Err)
		var fe *failure.Error
		if errors.As(classified, &fe) && fe.Reason != workerv1.ReasonRegistryAuth {
			// Anything but refused credentials is worth another attempt,
			// which pushes nothing but the signature.
			classified = failure.Retryable(workerv1.ReasonSignaturePush, pe.Err)
		}
		return fail(wrapMessage(classified, fmt.Sprintf("%s is pushed, but attaching its signature failed: pushing %s", res.Reference, pe.Tag)))
	}
	if err != nil {
		return fail(failure.Retryable(workerv1.ReasonSignaturePush, err))
	}
	res.Signature, res.Attestation = att.Signature.String(), att.Attestation.String()
	fmt.Fprintf(os.Stderr, "sign: %s signed (%s) with provenance (%s)\n", res.Reference, res.Signature, res.Attestation)
	return res
}

// wrapMessage prefixes a classified error's message, keeping its reason.
func wrapMessage(err error, prefix string) error {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return &failure.Error{Reason: fe.Reason, Permanent: fe.Permanent, Err: fmt.Errorf("%s: %w", prefix, fe.Err)}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// builderProvenance fills in who built: packline, its version, the worker
// image as the Job names it, and the running binary's own digest (the
// image is often named by tag, and the binary is what ran).
func builderProvenance(p sign.Provenance) sign.Provenance {
	p.BuilderID = "https://packline.dev/worker"
	p.BuilderVersion = map[string]string{"packline": version}
	if img := os.Getenv(workerv1.EnvWorkerImage); img != "" {
		dep := sign.Dependency{Name: "worker-image", URI: "oci://" + img}
		if _, d, ok := cutDigest(img); ok {
			dep.Digest = map[string]string{d.Algorithm().String(): d.Encoded()}
		}
		p.BuilderDependencies = append(p.BuilderDependencies, dep)
	}
	if sum, err := executableSHA256(); err == nil {
		p.BuilderDependencies = append(p.BuilderDependencies, sign.Dependency{Name: "worker-binary", Digest: map[string]string{"sha256": sum}})
	}
	p.InvocationID = os.Getenv(workerv1.EnvInvocation)
	return p
}

func cutDigest(ref string) (string, digest.Digest, bool) {
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '@' {
			d, err := digest.Parse(ref[i+1:])
			return ref[:i], d, err == nil
		}
	}
	return ref, "", false
}

// executableSHA256 is the running binary's sha256, computed once.
var executableSHA256 = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
})
