package postrender

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// server is the vllm-server fixture's shape: a Deployment with the model
// as its second volume, and its own init container. The container's mount
// does not say readOnly: an image volume is read-only anyway, so templates
// often leave it out.
const server = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      %s
      initContainers:
        - name: warmup
          image: busybox
      containers:
        - name: vllm
          image: vllm/vllm-openai
          volumeMounts:
            - name: model
              mountPath: /models
      volumes:
        - name: cache
          emptyDir: {}
        - name: model
          image:
            reference: reg.example:5000/models/tiny@sha256:1111111111111111111111111111111111111111111111111111111111111111
`

const modelRef = "reg.example:5000/models/tiny@sha256:1111111111111111111111111111111111111111111111111111111111111111"

var hardened = &corev1.SecurityContext{
	AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
	Privileged: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
}

func TestInitPulls(t *testing.T) {
	binding := v1alpha1.ParameterBinding{Value: "model", Kind: v1alpha1.BindingField, Mount: v1alpha1.ArtifactMountInitPull,
		Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "vllm"}, FieldPath: "/spec/template/spec/volumes/1/image/reference"}
	with := func(f func(*v1alpha1.ParameterBinding)) v1alpha1.ParameterBinding {
		b := binding
		f(&b)
		return b
	}
	warmup := corev1.Container{Name: "warmup", Image: "busybox"}
	pull := corev1.Container{Name: "packline-pull-model", Image: "reg.example:5000/packline/worker@sha256:22",
		Args:            []string{"pull", "--plain-http", modelRef, PullDir},
		VolumeMounts:    []corev1.VolumeMount{{Name: "model", MountPath: PullDir}},
		SecurityContext: hardened}
	cache := corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	imageVolume := corev1.Volume{Name: "model", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: modelRef}}}
	pulled := corev1.Volume{Name: "model", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	ip := &workerv1.InitPull{Image: "reg.example:5000/packline/worker@sha256:22", PlainHTTP: []string{"model"}}

	tests := []struct {
		name     string
		podExtra string
		binding  v1alpha1.ParameterBinding
		values   map[string]any
		ip       *workerv1.InitPull
		profile  *v1alpha1.EnvironmentProfileSpec
		wantInit []corev1.Container
		wantVols []corev1.Volume
		// wantMounts, when set, are the workload container's mounts.
		wantMounts []corev1.VolumeMount
		wantError  string
	}{{
		name: "image volume becomes an emptyDir filled first by worker pull", binding: binding, values: map[string]any{"model": "tiny"}, ip: ip,
		wantInit: []corev1.Container{pull, warmup}, wantVols: []corev1.Volume{cache, pulled},
	}, {
		name: "TLS registry, pod pull Secret mounted as DOCKER_CONFIG", podExtra: "imagePullSecrets: [{name: regcred}, {name: other}]",
		binding: binding, values: map[string]any{"model": "tiny"}, ip: &workerv1.InitPull{Image: ip.Image},
		wantInit: []corev1.Container{{Name: "packline-pull-model", Image: ip.Image, Args: []string{"pull", modelRef, PullDir},
			Env: []corev1.EnvVar{{Name: "DOCKER_CONFIG", Value: "/var/run/packline/pull-auth"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "model", MountPath: PullDir},
				{Name: "packline-pull-auth", MountPath: "/var/run/packline/pull-auth", ReadOnly: true}},
			SecurityContext: hardened}, warmup},
		wantVols: []corev1.Volume{cache, pulled, {Name: "packline-pull-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "regcred", Items: []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "config.json"}}}}}},
	}, {
		name: "the workload mounts the filled emptyDir read-only, as it did the image volume", binding: binding, values: map[string]any{"model": "tiny"}, ip: ip,
		wantInit: []corev1.Container{pull, warmup}, wantVols: []corev1.Volume{cache, pulled},
		wantMounts: []corev1.VolumeMount{{Name: "model", MountPath: "/models", ReadOnly: true}},
	}, {
		// The transport is the tenant's (its Artifact's spec.target), the
		// pull Secret the template's or the profile's: never sent over a
		// transport the tenant weakened.
		name: "plain HTTP: the pod's pull Secret is not mounted", podExtra: "imagePullSecrets: [{name: regcred}]",
		binding: binding, values: map[string]any{"model": "tiny"}, ip: ip,
		wantInit: []corev1.Container{pull, warmup}, wantVols: []corev1.Volume{cache, pulled},
	}, {
		name: "TLS not verified: the pod's pull Secret is not mounted", podExtra: "imagePullSecrets: [{name: regcred}]",
		binding: binding, values: map[string]any{"model": "tiny"}, ip: &workerv1.InitPull{Image: ip.Image, Insecure: []string{"model"}},
		wantInit: []corev1.Container{{Name: "packline-pull-model", Image: ip.Image, Args: []string{"pull", "--insecure", modelRef, PullDir},
			VolumeMounts: []corev1.VolumeMount{{Name: "model", MountPath: PullDir}}, SecurityContext: hardened}, warmup},
		wantVols: []corev1.Volume{cache, pulled},
	}, {
		name: "the profile's registry rewrites apply to the worker image", binding: binding, values: map[string]any{"model": "tiny"}, ip: ip,
		profile:  &v1alpha1.EnvironmentProfileSpec{RegistryRewrites: []v1alpha1.RegistryRewrite{{From: "reg.example:5000/packline", To: "mirror.example/packline"}}},
		wantInit: []corev1.Container{func() corev1.Container { c := pull; c.Image = "mirror.example/packline/worker@sha256:22"; return c }(), warmup},
		wantVols: []corev1.Volume{cache, pulled},
	}, {
		name: "mount ImageVolume keeps the image volume", binding: with(func(b *v1alpha1.ParameterBinding) { b.Mount = v1alpha1.ArtifactMountImageVolume }),
		values: map[string]any{"model": "tiny"}, ip: ip, wantInit: []corev1.Container{warmup}, wantVols: []corev1.Volume{cache, imageVolume},
	}, {
		name: "value not set: the template's volume stays", binding: binding, values: map[string]any{}, ip: ip,
		wantInit: []corev1.Container{warmup}, wantVols: []corev1.Volume{cache, imageVolume},
	}, {
		name: "fieldPath not an image volume reference", binding: with(func(b *v1alpha1.ParameterBinding) { b.FieldPath = "/spec/template/spec/containers/0/image" }),
		values: map[string]any{"model": "tiny"}, ip: ip,
		wantError: `parameters[0]: fieldPath "/spec/template/spec/containers/0/image": mount InitPull binds an image volume's reference, <pod spec>/volumes/<index>/image/reference`,
	}, {
		name: "fieldPath outside the target's pod spec", binding: with(func(b *v1alpha1.ParameterBinding) { b.FieldPath = "/spec/volumes/1/image/reference" }),
		values: map[string]any{"model": "tiny"}, ip: ip,
		wantError: `parameters[0]: fieldPath "/spec/volumes/1/image/reference" is not in the pod spec of Deployment vllm`,
	}, {
		name: "index past the volumes", binding: with(func(b *v1alpha1.ParameterBinding) { b.FieldPath = "/spec/template/spec/volumes/5/image/reference" }),
		values: map[string]any{"model": "tiny"}, ip: ip,
		wantError: `parameters[0]: fieldPath "/spec/template/spec/volumes/5/image/reference": Deployment vllm has 2 volumes`,
	}, {
		name: "a volume that is not an image volume", binding: with(func(b *v1alpha1.ParameterBinding) { b.FieldPath = "/spec/template/spec/volumes/0/image/reference" }),
		values: map[string]any{"model": "tiny"}, ip: ip,
		wantError: `parameters[0]: fieldPath "/spec/template/spec/volumes/0/image/reference": volume 0 is not an image volume with a name`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := resmap.NewFactory(provider.NewDefaultDepProvider().GetResourceFactory()).
				NewResMapFromBytes([]byte(strings.Replace(server, "%s", tc.podExtra, 1)))
			if err != nil {
				t.Fatal(err)
			}
			err = InitPulls(m, []v1alpha1.ParameterBinding{tc.binding}, tc.values, tc.ip, tc.profile)
			if tc.wantError != "" {
				if err == nil || err.Error() != tc.wantError {
					t.Fatalf("error %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := m.Resources()[0].MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			spec := d.Spec.Template.Spec
			if diff := cmp.Diff(tc.wantInit, spec.InitContainers); diff != "" {
				t.Errorf("initContainers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantVols, spec.Volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			if tc.wantMounts != nil {
				if diff := cmp.Diff(tc.wantMounts, spec.Containers[0].VolumeMounts); diff != "" {
					t.Errorf("the workload's mounts (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestInitPullName(t *testing.T) {
	if got := initPullName(strings.Repeat("v", 60)); len(got) != 63 {
		t.Errorf("initPullName of a 60-character volume is %d characters", len(got))
	}
}
