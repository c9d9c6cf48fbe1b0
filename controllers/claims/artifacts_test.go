package claims

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

func TestResolveArtifacts(t *testing.T) {
	const ref = "registry.example.com/models/llama@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	deploy := v1alpha1.ObjectSelector{Kind: "Deployment", Name: "vllm"}
	tpl := &v1alpha1.ClaimTemplate{Spec: v1alpha1.ClaimTemplateSpec{Parameters: []v1alpha1.ParameterBinding{
		{Value: "model", Kind: v1alpha1.BindingArtifact, Target: deploy, FieldPath: "/spec/template/spec/volumes/0/image/reference"},
		{Value: "adapter", Kind: v1alpha1.BindingArtifact, Target: deploy, EnvName: "ADAPTER", ArtifactView: v1alpha1.ArtifactViewArtifact},
		{Value: "replicas", Kind: v1alpha1.BindingReplicas, Target: deploy},
	}}}
	ready := func(name, reference string) *v1alpha1.Artifact {
		a := &v1alpha1.Artifact{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
		a.Status.ObservedGeneration, a.Status.Phase, a.Status.Reference = 1, v1alpha1.PhaseSucceeded, reference
		return a
	}
	const image = "registry.example.com/models/llama@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	withImage := func(imageRef string) *v1alpha1.Artifact {
		a := ready("llama", ref)
		a.Status.ImageReference = imageRef
		return a
	}
	running := ready("llama", "")
	running.Status.Phase = v1alpha1.PhaseRunning
	cases := []struct {
		name       string
		values     string
		artifacts  map[string]*v1alpha1.Artifact
		wantValues string
		wantRefs   []string
		notReady   string
	}{
		{name: "no binding used", values: `{"replicas":2}`, wantValues: `{"replicas":2}`},
		{name: "bound and ready", values: `{"model":"llama","replicas":2}`,
			artifacts:  map[string]*v1alpha1.Artifact{"llama": ready("llama", ref)},
			wantValues: `{"model":"` + ref + `","replicas":2}`, wantRefs: []string{"model=" + ref}},
		{name: "the image view by default", values: `{"model":"llama"}`,
			artifacts:  map[string]*v1alpha1.Artifact{"llama": withImage(image)},
			wantValues: `{"model":"` + image + `"}`, wantRefs: []string{"model=" + image}},
		{name: "the artifact when the binding asks for it", values: `{"adapter":"llama"}`,
			artifacts:  map[string]*v1alpha1.Artifact{"llama": withImage(image)},
			wantValues: `{"adapter":"` + ref + `"}`, wantRefs: []string{"adapter=" + ref}},
		{name: "an image view in another repository", values: `{"model":"llama"}`,
			artifacts: map[string]*v1alpha1.Artifact{"llama": withImage("registry.example.com/evil/x@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210")},
			notReady:  "not <repository of status.reference>@sha256:…"},
		{name: "missing", values: `{"model":"llama"}`, notReady: "does not exist"},
		{name: "still running", values: `{"model":"llama"}`, artifacts: map[string]*v1alpha1.Artifact{"llama": running}, notReady: "is not Ready"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.Claim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml"}, Spec: v1alpha1.ClaimSpec{Values: js(tc.values)}}
			values, params, refs, err := ResolveArtifacts(c, tpl, tc.artifacts)
			var nr *ArtifactNotReady
			if tc.notReady != "" {
				if !errors.As(err, &nr) || nr.Value != "model" || nr.Name != "llama" || !strings.Contains(err.Error(), tc.notReady) {
					t.Fatalf("err = %v, want ArtifactNotReady for spec.values.model: %s", err, tc.notReady)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(values.Raw) != tc.wantValues {
				t.Errorf("values = %s, want %s", values.Raw, tc.wantValues)
			}
			if diff := cmp.Diff(tc.wantRefs, refs); diff != "" {
				t.Errorf("refs (-want +got):\n%s", diff)
			}
			for _, p := range params {
				if p.Kind == v1alpha1.BindingArtifact {
					t.Errorf("an Artifact binding reached the worker: %+v", p)
				}
			}
			if len(tc.wantRefs) > 0 && (params[0].Kind != v1alpha1.BindingField || params[1].Kind != v1alpha1.BindingEnv) {
				t.Errorf("bindings = %+v, want Field and Env", params)
			}
		})
	}
}

func TestInitPullOf(t *testing.T) {
	deploy := v1alpha1.ObjectSelector{Kind: "Deployment", Name: "vllm"}
	model := v1alpha1.ParameterBinding{Value: "model", Kind: v1alpha1.BindingArtifact, Target: deploy,
		FieldPath: "/spec/template/spec/volumes/0/image/reference", Mount: v1alpha1.ArtifactMountInitPull}
	adapter := v1alpha1.ParameterBinding{Value: "adapter", Kind: v1alpha1.BindingArtifact, Target: deploy,
		FieldPath: "/spec/template/spec/volumes/1/image/reference", Mount: v1alpha1.ArtifactMountInitPull}
	volume := model
	volume.Mount = v1alpha1.ArtifactMountImageVolume
	artifact := func(plain, insecure bool) *v1alpha1.Artifact {
		a := &v1alpha1.Artifact{}
		a.Spec.Target.PlainHTTP, a.Spec.Target.InsecureSkipTLSVerify = plain, insecure
		return a
	}
	const worker = "ghcr.io/packline/worker@sha256:22"
	cases := []struct {
		name      string
		params    []v1alpha1.ParameterBinding
		values    string
		artifacts map[string]*v1alpha1.Artifact
		want      *workerv1.InitPull
	}{
		{name: "no InitPull binding: nothing in the spec", params: []v1alpha1.ParameterBinding{volume}, values: `{"model":"llama"}`,
			artifacts: map[string]*v1alpha1.Artifact{"llama": artifact(true, false)}},
		{name: "each value's own registry settings", params: []v1alpha1.ParameterBinding{model, adapter}, values: `{"model":"llama","adapter":"lora"}`,
			artifacts: map[string]*v1alpha1.Artifact{"llama": artifact(true, false), "lora": artifact(false, true)},
			want:      &workerv1.InitPull{Image: worker, PlainHTTP: []string{"model"}, Insecure: []string{"adapter"}}},
		{name: "an unset value still names the image", params: []v1alpha1.ParameterBinding{model}, values: `{}`,
			want: &workerv1.InitPull{Image: worker}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.Claim{Spec: v1alpha1.ClaimSpec{Values: &apiextensionsv1.JSON{Raw: []byte(tc.values)}}}
			tpl := &v1alpha1.ClaimTemplate{Spec: v1alpha1.ClaimTemplateSpec{Parameters: tc.params}}
			if d := cmp.Diff(tc.want, InitPullOf(c, tpl, tc.artifacts, worker)); d != "" {
				t.Errorf("InitPullOf (-want +got):\n%s", d)
			}
		})
	}
}
