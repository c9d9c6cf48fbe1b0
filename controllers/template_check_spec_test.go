package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/packline/packline/api/v1alpha1"
)

// TestCheckSpecDropsArtifactBindings: a schema default for an
// Artifact-bound value used to reach the worker as a binding of kind
// Artifact, which it refuses ("parameters[0] has unknown kind"), so the
// template could never pass its check.
func TestCheckSpecDropsArtifactBindings(t *testing.T) {
	tpl := &v1alpha1.ClaimTemplate{Spec: v1alpha1.ClaimTemplateSpec{
		ValuesSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"model":{"type":"string","default":"llama"},"replicas":{"type":"integer","default":1}}}`)},
		Parameters: []v1alpha1.ParameterBinding{
			{Value: "model", Kind: v1alpha1.BindingArtifact, FieldPath: "/spec/template/spec/volumes/0/image/reference"},
			{Value: "replicas", Kind: v1alpha1.BindingReplicas},
		},
	}}
	doc, err := checkSpec(tpl, "ns")
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.ParameterBinding{{Value: "replicas", Kind: v1alpha1.BindingReplicas}}
	if d := cmp.Diff(want, doc.Template.Parameters); d != "" {
		t.Errorf("parameters (-want +got):\n%s", d)
	}
	if len(tpl.Spec.Parameters) != 2 {
		t.Errorf("checkSpec changed the template's own parameters: %v", tpl.Spec.Parameters)
	}
}
