package claims

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
)

func js(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

const schema = `{"type":"object","additionalProperties":false,
 "properties":{"replicas":{"type":"integer","minimum":1,"maximum":3},
  "image":{"type":"string"},
  "env":{"type":"array","items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}},
 "required":["image"]}`

func TestValidateValues(t *testing.T) {
	s, err := CompileSchema(js(schema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		values *apiextensionsv1.JSON
		want   []string // substrings the error must hold; none means valid
	}{
		{"valid", js(`{"replicas":2,"image":"code-server:4"}`), nil},
		{"too many replicas", js(`{"replicas":9,"image":"x"}`), []string{"spec.values.replicas", "maximum"}},
		{"wrong type", js(`{"replicas":"two","image":"x"}`), []string{"spec.values.replicas", "integer"}},
		{"missing required", js(`{"replicas":1}`), []string{"spec.values", "image"}},
		{"unknown key", js(`{"image":"x","gpu":true}`), []string{"gpu"}},
		{"nested array item", js(`{"image":"x","env":[{"name":"A"},{}]}`), []string{"spec.values.env[1]", "name"}},
		{"nil values against required", nil, []string{"image"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateValues(s, tc.values)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid values rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("invalid values accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCompileSchemaRefusesRemoteRefs(t *testing.T) {
	for _, ref := range []string{"https://example.com/s.json", "file:///etc/passwd"} {
		if _, err := CompileSchema(js(`{"$ref":"` + ref + `"}`)); err == nil {
			t.Errorf("schema with $ref %s compiled", ref)
		}
	}
	if _, err := CompileSchema(js(`{"type": 5}`)); err == nil || !strings.Contains(err.Error(), "spec.valuesSchema") {
		t.Errorf("invalid schema error = %v", err)
	}
}

func profile(name string, prio int32, match map[string]string) v1alpha1.EnvironmentProfile {
	return v1alpha1.EnvironmentProfile{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.EnvironmentProfileSpec{Priority: prio, NamespaceSelector: metav1.LabelSelector{MatchLabels: match}}}
}

func TestSelectProfile(t *testing.T) {
	all := []v1alpha1.EnvironmentProfile{
		profile("zeta", 10, map[string]string{"site": "lab"}),
		profile("alpha", 10, map[string]string{"site": "lab"}),
		profile("gpu", 50, map[string]string{"site": "lab", "gpu": "true"}),
		profile("prod", 100, map[string]string{"site": "prod"}),
	}
	cases := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"tie broken by name", map[string]string{"site": "lab"}, "alpha"},
		{"priority wins", map[string]string{"site": "lab", "gpu": "true"}, "gpu"},
		{"single match", map[string]string{"site": "prod"}, "prod"},
		{"none", map[string]string{"site": "other"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}} {
				var ps []v1alpha1.EnvironmentProfile
				for _, i := range order {
					ps = append(ps, all[i])
				}
				got, err := SelectProfile(ps, tc.labels)
				if err != nil {
					t.Fatal(err)
				}
				name := ""
				if got != nil {
					name = got.Name
				}
				if diff := cmp.Diff(tc.want, name); diff != "" {
					t.Errorf("order %v (-want +got): %s", order, diff)
				}
			}
		})
	}
}

func TestCheckAccessAndExposure(t *testing.T) {
	tpl := &v1alpha1.ClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "code-server"}, Spec: v1alpha1.ClaimTemplateSpec{
		Access:    v1alpha1.Access{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "true"}}},
		Exposures: []v1alpha1.ExposureOption{{Type: v1alpha1.ExposureClusterIP}, {Type: v1alpha1.ExposureIngress, Component: "c/ingress"}},
	}}
	if err := CheckAccess(tpl, "team-a", map[string]string{"tenant": "true"}); err != nil {
		t.Errorf("allowed namespace refused: %v", err)
	}
	if err := CheckAccess(tpl, "team-b", nil); err == nil || !strings.Contains(err.Error(), "spec.access.namespaceSelector") {
		t.Errorf("denied namespace error = %v", err)
	}
	opt, err := CheckExposure(tpl, v1alpha1.Exposure{Type: v1alpha1.ExposureIngress, Host: "a.example.com"})
	if err != nil || opt.Component != "c/ingress" {
		t.Errorf("ingress: %+v %v", opt, err)
	}
	if _, err := CheckExposure(tpl, v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}); err == nil ||
		!strings.Contains(err.Error(), "spec.exposure.type") || !strings.Contains(err.Error(), "ClusterIP, Ingress") {
		t.Errorf("nodeport error = %v", err)
	}
	bare := &v1alpha1.ClaimTemplate{}
	if _, err := CheckExposure(bare, v1alpha1.Exposure{}); err != nil {
		t.Errorf("default ClusterIP refused: %v", err)
	}
}

func TestTargetRepository(t *testing.T) {
	tpl := &v1alpha1.ClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: v1alpha1.ClaimTemplateSpec{RepositoryPrefix: "r.example.com/claims/"}}
	c := &v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Name: "ide", Namespace: "team-a"}}
	if got, _ := TargetRepository(tpl, c); got != "r.example.com/claims/team-a/ide" {
		t.Errorf("default = %q", got)
	}
	c.Spec.Target = &v1alpha1.Target{Repository: "r.example.com/own/ide"}
	if got, _ := TargetRepository(tpl, c); got != "r.example.com/own/ide" {
		t.Errorf("override = %q", got)
	}
	c.Spec.Target = nil
	if _, err := TargetRepository(&v1alpha1.ClaimTemplate{}, c); err == nil || !strings.Contains(err.Error(), "spec.target.repository") {
		t.Errorf("missing target error = %v", err)
	}
}

func TestImageValues(t *testing.T) {
	tpl := &v1alpha1.ClaimTemplate{Spec: v1alpha1.ClaimTemplateSpec{Parameters: []v1alpha1.ParameterBinding{
		{Value: "image", Kind: v1alpha1.BindingImage, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "app"}},
		{Value: "sidecar", Kind: v1alpha1.BindingImage, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "app"}, Container: "proxy"},
		{Value: "label", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "app"}, FieldPath: "/metadata/labels/x"},
	}}}
	claim := func(values string) *v1alpha1.Claim {
		return &v1alpha1.Claim{Spec: v1alpha1.ClaimSpec{Values: &apiextensionsv1.JSON{Raw: []byte(values)}}}
	}
	cases := []struct {
		name, values string
		wantErr      []string
	}{
		{"valid images", `{"image":"ghcr.io/acme/app:v1","sidecar":"envoyproxy/envoy:v1.31"}`, nil},
		{"unbound value is not an image", `{"label":"not an image!"}`, nil},
		{"bidirectional override", `{"image":"ghcr.io/acme/app:v1\u202e1v"}`, []string{"spec.values.image", "U+202E"}},
		{"newline and a bad tag", `{"image":"app:v1\nx","sidecar":"envoy:bad tag"}`, []string{"spec.values.image", "spec.values.sidecar"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ImageValues(claim(tc.values), tpl)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
	v := Violations(claim(`{"image":"app:v1\u200b"}`), tpl, nil)
	found := false
	for _, x := range v {
		found = found || (x.Reason == ReasonInvalidValues && strings.Contains(x.Err.Error(), "spec.values.image"))
	}
	if !found {
		t.Errorf("Violations does not report the image value: %+v", v)
	}
}
