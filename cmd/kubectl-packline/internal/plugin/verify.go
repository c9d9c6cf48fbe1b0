package plugin

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/sign"
)

func verifyFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.key, "key", "", "the cosign public key file (cosign.pub); default: key cosign.pub of the Secret in spec.signing.keySecretRef, if you may read it")
}

// runVerify checks the signature and the SLSA provenance of the digest in
// status, with the public key, as cosign verify and verify-attestation do
// (jobs/sign.Verify, the reading side of the worker's own signing code).
func runVerify(ctx context.Context, e *env, o *options, args []string) (int, error) {
	if len(args) != 1 {
		return ExitUsage, usagef("verify takes KIND/NAME")
	}
	kind, name, err := ParseRef(args[0], "Claim", "Artifact")
	if err != nil {
		return ExitUsage, err
	}
	if err := e.connect(); err != nil {
		return ExitFailed, err
	}
	obj, err := e.getPipelineObject(ctx, kind, name)
	if err != nil {
		return ExitFailed, err
	}
	pemBytes, keyFrom, err := e.publicKey(ctx, o.key, obj)
	if err != nil {
		return ExitFailed, err
	}
	pub, err := sign.LoadPublicKey(pemBytes)
	if err != nil {
		return ExitFailed, fmt.Errorf("%s: %w", keyFrom, err)
	}
	repo, d, err := pushedRepository(kind, obj)
	if err != nil {
		return ExitFailed, err
	}
	v, err := sign.Verify(ctx, repo, d, pub)
	if err != nil {
		return ExitFailed, fmt.Errorf("%s@%s does not verify with %s: %w", repo.Reference.Registry+"/"+repo.Reference.Repository, d, keyFrom, err)
	}
	fmt.Fprintf(e.stdout, "Verified %s@%s with %s\n", repo.Reference.Registry+"/"+repo.Reference.Repository, d, keyFrom)
	fmt.Fprintf(e.stdout, "  signatures:  %d valid\n", v.Signatures)
	fmt.Fprintf(e.stdout, "  provenance:  SLSA v1, builder %s, build type %s, invocation %s\n", v.BuilderID, v.BuildType, orNone(v.InvocationID))
	for _, r := range v.Resolved {
		fmt.Fprintf(e.stdout, "  built from:  %s\n", r)
	}
	return ExitOK, nil
}

func (e *env) publicKey(ctx context.Context, file string, obj pipelineObject) ([]byte, string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, "", usagef("--key: %v", err)
		}
		return b, "key " + file, nil
	}
	var s *v1alpha1.SigningSpec
	switch o := obj.(type) {
	case *v1alpha1.Artifact:
		s = o.Spec.Signing
	case *v1alpha1.Claim:
		s = o.Spec.Signing
	}
	if s == nil {
		return nil, "", usagef("--key is required: %s sets no spec.signing (an EnvironmentProfile's key is the platform admin's: ask them for cosign.pub)", obj.GetName())
	}
	var sec corev1.Secret
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: s.KeySecretRef.Name}, &sec); err != nil {
		return nil, "", fmt.Errorf("reading cosign.pub from Secret %s (spec.signing.keySecretRef): %s; or pass --key", s.KeySecretRef.Name, reason(err))
	}
	b, ok := sec.Data["cosign.pub"]
	if !ok {
		return nil, "", fmt.Errorf("Secret %s (spec.signing.keySecretRef) has no cosign.pub key; pass --key", s.KeySecretRef.Name)
	}
	return b, fmt.Sprintf("cosign.pub of Secret %s", s.KeySecretRef.Name), nil
}
