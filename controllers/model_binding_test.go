package controllers_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/wrappers"
)

// TestClaimBindsArtifact: a Claim whose values name an Artifact for an
// Artifact binding waits (ArtifactNotReady) until the Artifact is Ready,
// renders with the Artifact's digest-pinned reference in the bound field,
// and renders again when the Artifact's digest changes.
func TestClaimBindsArtifact(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	tpl := wrappers.MakeClaimTemplate(ns + "-vllm").Open().Obj()
	tpl.Spec.ValuesSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"model":{"type":"string"}}}`)}
	tpl.Spec.Parameters = []v1alpha1.ParameterBinding{{Value: "model", Kind: v1alpha1.BindingArtifact,
		Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "vllm-server"}, FieldPath: "/spec/template/spec/volumes/0/image/reference"}}
	create(t, tpl)
	key := client.ObjectKey{Namespace: ns, Name: "serve"}
	create(t, wrappers.MakeClaim(key.Name, ns, tpl.Name).Values(`{"model":"llama"}`).Obj())
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		ready := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(controllers.ReasonArtifactNotReady))
		g.Expect(ready.Message).To(ContainSubstring("spec.values.model: Artifact llama does not exist"))
	})

	create(t, wrappers.MakeArtifact("llama", ns).Obj())
	runJob(t, waitJob(t, ns, "llama", 1, 1), 0, okResult(digest))
	job := waitJob(t, ns, key.Name, 1, 1)
	doc := workerSpec(NewWithT(t), ns, key.Name)
	NewWithT(t).Expect(string(doc.Values.Raw)).To(Equal(`{"model":"registry.example.com/acme/tiny@` + digest + `"}`))
	NewWithT(t).Expect(doc.Template.Parameters[0].Kind).To(Equal(v1alpha1.BindingField))
	runJob(t, job, 0, okResult(digest))
	eventually(t, func(g Gomega) { g.Expect(getClaim(g, key).Status.Phase).To(Equal(v1alpha1.PhaseSucceeded)) })
	before := getClaim(NewWithT(t), key).Status.InputsHash

	// The Artifact is re-imported to a new digest: the Claim renders again.
	eventually(t, func(g Gomega) {
		a := getArtifact(g, client.ObjectKey{Namespace: ns, Name: "llama"})
		a.Spec.Target.Tag = "v2"
		g.Expect(env.Client.Update(context.Background(), a)).To(Succeed())
	})
	runJob(t, waitJob(t, ns, "llama", 2, 1), 0, okResult(otherDigest))
	eventually(t, func(g Gomega) {
		c := getClaim(g, key)
		g.Expect(c.Status.InputsHash).NotTo(Equal(before))
		g.Expect(string(workerSpec(g, ns, key.Name).Values.Raw)).To(ContainSubstring(otherDigest))
	})
}
