package controllers

import (
	"fmt"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/pipeline"
)

// resourceSigning mounts a resource's own signing key (spec.signing) and
// returns what the worker needs to sign, with hints naming the Secret.
func resourceSigning(m *pipeline.Mounts, s *v1alpha1.SigningSpec, res workerv1.Resource, hints map[string]string) *workerv1.Signing {
	if s == nil {
		return nil
	}
	m.SigningKey(s.KeySecretRef.Name)
	field := fmt.Sprintf("spec.signing.keySecretRef (Secret %q)", s.KeySecretRef.Name)
	addSigningHints(hints, field, "")
	return &workerv1.Signing{KeyField: field, Resource: res}
}

// profileSigning mounts an EnvironmentProfile's signing key; the run is in
// the template namespace, where that Secret is. Messages name the
// profile's field, not the admin's Secret, which the tenant cannot read
// and only an admin can fix.
func profileSigning(m *pipeline.Mounts, p *v1alpha1.EnvironmentProfile, res workerv1.Resource, hints map[string]string) *workerv1.Signing {
	m.SigningKey(p.Spec.Signing.KeySecretRef.Name)
	field := fmt.Sprintf("EnvironmentProfile %s spec.signing.keySecretRef", p.Name)
	addSigningHints(hints, field, "a platform admin must ")
	return &workerv1.Signing{KeyField: field, Resource: res, Profile: p.Name}
}

// addSigningHints say how to fix each signing failure.
func addSigningHints(hints map[string]string, field, who string) {
	hints[workerv1.ReasonSigningKeyMissing] = fmt.Sprintf("%screate the Secret of %s with the key in cosign.key (cosign generate-key-pair k8s://<namespace>/<name> writes one)%s", who, field, rerunHint)
	hints[workerv1.ReasonSigningKeyPassword] = fmt.Sprintf("%sput the key's password in cosign.password of the Secret of %s%s", who, field, rerunHint)
	hints[workerv1.ReasonSigningKeyUnsupported] = fmt.Sprintf("%sput an ECDSA P-256 key in cosign.key of the Secret of %s: cosign's encrypted PEM or plain PKCS#8 PEM%s", who, field, rerunHint)
	hints[workerv1.ReasonSignaturePush] = workerv1.Reasons[workerv1.ReasonSignaturePush].Hint
}

// resourceOf names obj for the provenance.
func resourceOf(kind string, obj pipeline.Object) workerv1.Resource {
	return workerv1.Resource{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), Generation: obj.GetGeneration()}
}
