package overlay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/api/v1alpha1"
)

func input(e v1alpha1.Exposure, values map[string]any) Input {
	return Input{
		Namespace: "team-a",
		RepoDir:   "../repo",
		Values:    values,
		Exposure:  e,
		Template: v1alpha1.ClaimTemplateSpec{
			Source:  v1alpha1.TemplateSource{Path: "apps/web/base"},
			Service: "web",
			Exposures: []v1alpha1.ExposureOption{
				{Type: v1alpha1.ExposureNodePort, Component: "apps/web/components/service-nodeport"},
				{Type: v1alpha1.ExposureIngress, Component: "apps/web/components/ingress"},
			},
			Generators: []v1alpha1.Generator{{Kind: "ConfigMap", Name: "web-settings", Values: []string{"motd"}}},
		},
	}
}

func port(p int32) *int32 { return &p }

// TestNodePortOnlyWhenAsked: without a user port there is no nodePort
// patch at all; with one, exactly that port.
func TestNodePortOnlyWhenAsked(t *testing.T) {
	o, err := Build(input(v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort}, nil))
	if err != nil {
		t.Fatal(err)
	}
	y, _ := o.YAML()
	if strings.Contains(string(y), "nodePort") {
		t.Errorf("nodePort patch without a user port:\n%s", y)
	}
	if diff := cmp.Diff([]string{"../repo/apps/web/components/service-nodeport"}, o.Kustomization.Components); diff != "" {
		t.Errorf("components (-want +got):\n%s", diff)
	}

	o, err = Build(input(v1alpha1.Exposure{Type: v1alpha1.ExposureNodePort, NodePort: port(31234)}, nil))
	if err != nil {
		t.Fatal(err)
	}
	// Selector holds unexported fields; compare it as the YAML kustomize reads.
	got, err := yaml.Marshal(o.Kustomization.Patches)
	if err != nil {
		t.Fatal(err)
	}
	want := "- patch: '[{\"op\":\"add\",\"path\":\"/spec/ports/0/nodePort\",\"value\":31234}]'\n  target:\n    kind: Service\n    name: web\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}
}

// TestValuesStayData: a value full of YAML and Kustomize syntax reaches the
// kustomization only as data, never as structure.
func TestValuesStayData(t *testing.T) {
	nasty := "x\nresources:\n- https://evil.example.com/x.yaml\n\"}]"
	o, err := Build(input(v1alpha1.Exposure{Type: v1alpha1.ExposureIngress, Host: nasty}, map[string]any{"motd": nasty}))
	if err != nil {
		t.Fatal(err)
	}
	y, err := o.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var back types.Kustomization
	if err := yaml.UnmarshalStrict(y, &back); err != nil {
		t.Fatalf("overlay does not round-trip: %v\n%s", err, y)
	}
	if diff := cmp.Diff([]string{"../repo/apps/web/base"}, back.Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	var ops []jsonPatch
	if err := json.Unmarshal([]byte(back.Patches[0].Patch), &ops); err != nil || len(ops) != 1 || ops[0].Value != nasty {
		t.Errorf("host patch %q: %v", back.Patches[0].Patch, err)
	}
	if got := string(o.Files["generated/ConfigMap/web-settings/motd"]); got != nasty {
		t.Errorf("generator file %q", got)
	}
}
