package render_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/render"
)

func ptr[T any](v T) *T { return &v }

// TestMatrix renders every app × exposure × profile and compares the whole
// output with the plain ClusterIP render plus exactly the changes the
// exposure and profile must make, so a change anywhere else fails too.
func TestMatrix(t *testing.T) {
	fx := snapshot(t)
	exposures := []v1alpha1.Exposure{
		{Type: v1alpha1.ExposureClusterIP},
		{Type: v1alpha1.ExposureNodePort},
		{Type: v1alpha1.ExposureNodePort, NodePort: ptr[int32](30080)},
		{Type: v1alpha1.ExposureLoadBalancer},
		{Type: v1alpha1.ExposureIngress, Host: "code.team-a.example.com"},
	}
	profiles := map[string]*v1alpha1.EnvironmentProfileSpec{"none": nil, "gpu": gpuProfile}

	for _, a := range apps {
		baseFiles, err := render.Manifests(claim(a, fx.srv.URL, v1alpha1.Exposure{}, nil, nil), fx.snap, render.Limits{})
		if err != nil {
			t.Fatalf("%s baseline: %v", a.name, err)
		}
		base := objects(t, baseFiles)
		checkBaseline(t, a, base)

		for _, e := range exposures {
			for pname, p := range profiles {
				name := fmt.Sprintf("%s/%s", a.name, e.Type)
				if e.NodePort != nil {
					name += "-pinned"
				}
				name += "/" + pname
				t.Run(name, func(t *testing.T) {
					files, err := render.Manifests(claim(a, fx.srv.URL, e, p, nil), fx.snap, render.Limits{})
					if err != nil {
						t.Fatal(err)
					}
					got := objects(t, files)
					want := expected(t, a, base, e, p)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("render (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// checkBaseline pins the facts the expected renders are derived from.
func checkBaseline(t *testing.T, a app, base map[string]map[string]any) {
	t.Helper()
	svc := base["Service/"+a.service]
	if svc == nil {
		t.Fatalf("%s: no Service %s in %v", a.name, a.service, keys(base))
	}
	if got := get(svc, "spec", "type"); got != "ClusterIP" {
		t.Errorf("%s baseline service type %v", a.name, got)
	}
	if got := get(svc, "spec", "ports", 0, "nodePort"); got != nil {
		t.Errorf("%s baseline has nodePort %v", a.name, got)
	}
	for k, o := range base {
		if strings.HasPrefix(k, "Ingress/") {
			t.Errorf("%s: ClusterIP render has %s", a.name, k)
		}
		if ns := get(o, "metadata", "namespace"); ns != "team-a" {
			t.Errorf("%s: %s namespace %v, want the claim's", a.name, k, ns)
		}
		if get(o, "spec", "storageClassName") != nil {
			t.Errorf("%s: %s has a storage class without a profile", a.name, k)
		}
	}
	dep := base["Deployment/"+a.name]
	if get(dep, "spec", "template", "spec", "runtimeClassName") != nil {
		t.Errorf("%s: runtimeClassName without a profile", a.name)
	}
	if _, ok := base["PersistentVolumeClaim/"+a.name+"-home"]; !ok && a.name == "code-server" {
		t.Errorf("code-server PVC missing: %v", keys(base))
	}
}

// expected is the baseline with exactly the exposure's and profile's edits.
func expected(t *testing.T, a app, base map[string]map[string]any, e v1alpha1.Exposure, p *v1alpha1.EnvironmentProfileSpec) map[string]map[string]any {
	want := deepCopy(t, base)
	svc := want["Service/"+a.service]
	switch e.Type {
	case v1alpha1.ExposureNodePort, v1alpha1.ExposureLoadBalancer:
		set(svc, string(e.Type), "spec", "type")
		if e.NodePort != nil {
			get(svc, "spec", "ports", 0).(map[string]any)["nodePort"] = float64(*e.NodePort)
		}
	case v1alpha1.ExposureIngress:
		want["Ingress/"+a.name] = map[string]any{
			"apiVersion": "networking.k8s.io/v1",
			"kind":       "Ingress",
			"metadata":   map[string]any{"name": a.name, "namespace": "team-a"},
			"spec": map[string]any{"rules": []any{map[string]any{
				"host": e.Host,
				"http": map[string]any{"paths": []any{map[string]any{
					"path": "/", "pathType": "Prefix",
					"backend": map[string]any{"service": map[string]any{"name": a.service, "port": map[string]any{"name": "http"}}},
				}}},
			}}},
		}
	}
	if p == nil {
		return want
	}
	for k, o := range want {
		for lk, lv := range p.Labels {
			set(o, lv, "metadata", "labels", lk)
		}
		switch {
		case strings.HasPrefix(k, "PersistentVolumeClaim/"):
			set(o, p.StorageClassName, "spec", "storageClassName")
		case strings.HasPrefix(k, "Ingress/"):
			set(o, p.IngressClassName, "spec", "ingressClassName")
		case strings.HasPrefix(k, "Deployment/"):
			for lk, lv := range p.Labels {
				set(o, lv, "spec", "template", "metadata", "labels", lk)
			}
			pod := get(o, "spec", "template", "spec").(map[string]any)
			pod["runtimeClassName"] = p.RuntimeClassName
			pod["imagePullSecrets"] = []any{map[string]any{"name": "mirror-pull"}}
			pod["nodeSelector"] = map[string]any{"node.example.com/pool": "gpu"}
			pod["tolerations"] = []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}}
			get(pod, "containers", 0).(map[string]any)["image"] = a.mirroredImage
		}
	}
	return want
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
