package controllers_test

import (
	"strings"
	"testing"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers"
	"github.com/packline/packline/test/wrappers"
)

// A fieldPath that is not a JSON pointer (stored before the CRD's pattern
// was tightened) makes the template invalid at once, instead of Ready=True
// until a Claim sets the value.
func TestValidateTemplateFieldPath(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/metadata/annotations/example.com~1a", ""},
		{"/metadata/annotations/a~b", `spec.parameters[0].fieldPath: "/metadata/annotations/a~b" is not a JSON pointer`},
		{"/spec//replicas", `spec.parameters[0].fieldPath: "/spec//replicas" is not a JSON pointer`},
		{"spec.replicas", `spec.parameters[0].fieldPath: "spec.replicas" is not a JSON pointer`},
	} {
		tpl := wrappers.MakeClaimTemplate("web").Parameters(v1alpha1.ParameterBinding{Value: "x", Kind: v1alpha1.BindingField,
			Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"}, FieldPath: tc.path}).Obj()
		tpl.Spec.ValuesSchema = nil
		err := controllers.ValidateTemplate(tpl)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.path, err, tc.want)
		}
	}
}
