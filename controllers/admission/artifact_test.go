package admission_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// ArtifactWrapper builds Artifacts fluently.
type ArtifactWrapper struct{ v1alpha1.Artifact }

func makeArtifact(name, ns string) *ArtifactWrapper {
	return &ArtifactWrapper{v1alpha1.Artifact{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ArtifactSpec{
			Source: v1alpha1.ArtifactSource{HuggingFace: &v1alpha1.HuggingFaceSource{Repo: "acme/tiny"}},
			Target: v1alpha1.Target{Repository: "registry.example.com/acme/tiny"},
		},
	}}
}

func (w *ArtifactWrapper) HFToken(secret string) *ArtifactWrapper {
	w.Spec.Source.HuggingFace.TokenSecretRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "token"}
	return w
}
func (w *ArtifactWrapper) Volume(pvc string) *ArtifactWrapper {
	w.Spec.Source = v1alpha1.ArtifactSource{Volume: &v1alpha1.VolumeSource{ClaimName: pvc}}
	return w
}
func (w *ArtifactWrapper) PushSecret(s string) *ArtifactWrapper {
	w.Spec.Target.PushSecretRef = &corev1.LocalObjectReference{Name: s}
	return w
}
func (w *ArtifactWrapper) CASecret(s string) *ArtifactWrapper {
	w.Spec.Target.CASecretRef = &corev1.LocalObjectReference{Name: s}
	return w
}
func (w *ArtifactWrapper) SigningKey(s string) *ArtifactWrapper {
	w.Spec.Signing = &v1alpha1.SigningSpec{KeySecretRef: corev1.LocalObjectReference{Name: s}}
	return w
}
func (w *ArtifactWrapper) Obj() *v1alpha1.Artifact { return &w.Artifact }

// Creating an Artifact must not grant reading the namespace's Secrets: each
// Secret and PVC it names needs the requester's own right.
func TestArtifactReferences(t *testing.T) {
	startManager(t, true)
	ns := tenantNamespace(t)
	grant(t, ns, "alice", writeClaims(), getSecret("hf-ok"), getSecret("push-ok"), getSecret("cosign-ok"),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get"}, ResourceNames: []string{"models"}})
	cases := []struct {
		name string
		a    *v1alpha1.Artifact
		deny []string
	}{
		{name: "no references", a: makeArtifact("plain", ns).Obj()},
		{name: "readable secrets", a: makeArtifact("ok", ns).HFToken("hf-ok").PushSecret("push-ok").Obj()},
		{name: "token of another team", a: makeArtifact("hf", ns).HFToken("prod-hf").Obj(),
			deny: []string{`spec.source.huggingFace.tokenSecretRef: using Secret prod-hf needs "get" on secrets named "prod-hf" in namespace ` + ns}},
		{name: "push and CA secrets", a: makeArtifact("push", ns).PushSecret("prod-push").CASecret("prod-ca").Obj(),
			deny: []string{"spec.target.pushSecretRef: using Secret prod-push", "spec.target.caSecretRef: using Secret prod-ca"}},
		{name: "readable signing key", a: makeArtifact("signed", ns).SigningKey("cosign-ok").Obj()},
		{name: "signing key of another team", a: makeArtifact("signed-prod", ns).SigningKey("prod-cosign").Obj(),
			deny: []string{`spec.signing.keySecretRef: using Secret prod-cosign needs "get" on secrets named "prod-cosign"`}},
		{name: "readable volume", a: makeArtifact("vol-ok", ns).Volume("models").Obj()},
		{name: "requests above limits", a: func() *v1alpha1.Artifact {
			a := makeArtifact("res", ns).Obj()
			a.Spec.Resources = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
			return a
		}(), deny: []string{"spec.resources.requests.memory: 4Gi is above its limit 1Gi"}},
		{name: "volume of another team", a: makeArtifact("vol", ns).Volume("private").Obj(),
			deny: []string{`spec.source.volume.claimName: reading PersistentVolumeClaim private needs "get" on persistentvolumeclaims named "private"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := as(t, "alice").Create(context.Background(), tc.a)
			if len(tc.deny) == 0 {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			t.Logf("denied: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(`admission webhook "vartifact.packline.dev" denied the request`))
			for _, want := range tc.deny {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}
