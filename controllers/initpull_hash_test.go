package controllers_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/wrappers"
)

// TestInitPullIsInTheInputsHash: the init container of a mount InitPull
// binding runs the manager's worker image, with the bound Artifact's own
// transport; both are in the render, so a change of either must render
// again, as a change of the Artifact's digest does.
func TestInitPullIsInTheInputsHash(t *testing.T) {
	tpl := wrappers.MakeClaimTemplate("vllm").Open().Obj()
	tpl.Spec.ValuesSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"model":{"type":"string"}}}`)}
	tpl.Spec.Parameters = []v1alpha1.ParameterBinding{{Value: "model", Kind: v1alpha1.BindingArtifact, Mount: v1alpha1.ArtifactMountInitPull,
		Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "vllm-server"}, FieldPath: "/spec/template/spec/volumes/0/image/reference"}}
	c := wrappers.MakeClaim("serve", "team-a", "vllm").Values(`{"model":"llama"}`).Obj()
	artifact := func(plainHTTP bool) *v1alpha1.Artifact {
		a := wrappers.MakeArtifact("llama", "team-a").Obj()
		a.Spec.Target.PlainHTTP = plainHTTP
		a.Status.Phase = v1alpha1.PhaseSucceeded
		a.Status.Reference = "registry.example.com/acme/llama@sha256:" + sixtyFour
		return a
	}
	hash := func(workerImage string, plainHTTP bool) string {
		t.Helper()
		w, err := controllers.ClaimWork(c, controllers.ClaimInputs{Template: tpl,
			Artifacts: map[string]*v1alpha1.Artifact{"llama": artifact(plainHTTP)}, WorkerImage: workerImage})
		if err != nil {
			t.Fatal(err)
		}
		return w.InputsHash
	}
	base := hash("worker:v1", false)
	if base != hash("worker:v1", false) {
		t.Fatal("the same inputs gave two hashes")
	}
	if hash("worker:v2", false) == base {
		t.Error("a new worker image kept the inputs hash: the init container would keep the old image")
	}
	if hash("worker:v1", true) == base {
		t.Error("the bound Artifact's plainHTTP kept the inputs hash: the init container would keep the old transport")
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
