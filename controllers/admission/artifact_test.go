package admission_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/wrappers"
)

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
		{name: "no references", a: wrappers.MakeArtifact("plain", ns).Obj()},
		{name: "readable secrets", a: wrappers.MakeArtifact("ok", ns).HFToken("hf-ok").PushSecret("push-ok").Obj()},
		{name: "token of another team", a: wrappers.MakeArtifact("hf", ns).HFToken("prod-hf").Obj(),
			deny: []string{`spec.source.huggingFace.tokenSecretRef: using Secret prod-hf needs "get" on secrets named "prod-hf" in namespace ` + ns}},
		{name: "push and CA secrets", a: wrappers.MakeArtifact("push", ns).PushSecret("prod-push").CASecret("prod-ca").Obj(),
			deny: []string{"spec.target.pushSecretRef: using Secret prod-push", "spec.target.caSecretRef: using Secret prod-ca"}},
		{name: "readable signing key", a: wrappers.MakeArtifact("signed", ns).SigningKey("cosign-ok").Obj()},
		{name: "signing key of another team", a: wrappers.MakeArtifact("signed-prod", ns).SigningKey("prod-cosign").Obj(),
			deny: []string{`spec.signing.keySecretRef: using Secret prod-cosign needs "get" on secrets named "prod-cosign"`}},
		{name: "readable volume", a: wrappers.MakeArtifact("vol-ok", ns).Volume("models").Obj()},
		{name: "requests above limits", a: func() *v1alpha1.Artifact {
			a := wrappers.MakeArtifact("res", ns).Obj()
			a.Spec.Resources = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
			return a
		}(), deny: []string{"spec.resources.requests.memory: 4Gi is above its limit 1Gi"}},
		{name: "negative request", a: func() *v1alpha1.Artifact {
			a := wrappers.MakeArtifact("res-neg", ns).Obj()
			a.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}}
			return a
		}(), deny: []string{"spec.resources.requests.cpu: -1 must not be negative"}},
		{name: "volume of another team", a: wrappers.MakeArtifact("vol", ns).Volume("private").Obj(),
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
