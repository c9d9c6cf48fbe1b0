package render_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/render"
)

// TestBindings sets each binding kind and checks the field it lands in.
func TestBindings(t *testing.T) {
	fx := snapshot(t)
	a := apps[0]
	values := map[string]any{
		"replicas":      3,
		"image":         "nginx:1.27",
		"resources":     map[string]any{"limits": map[string]any{"cpu": "2", "memory": "4Gi"}},
		"logLevel":      "debug",
		"priorityClass": "high",
		"password":      "hunter2",
		"greeting":      "a=b\nline two",
		"limits":        map[string]any{"max": 5},
	}
	tests := []struct {
		name    string
		profile *v1alpha1.EnvironmentProfileSpec
		path    []any
		want    any
	}{
		{"replicas", nil, []any{"Deployment/code-server", "spec", "replicas"}, float64(3)},
		{"image", nil, []any{"Deployment/code-server", "spec", "template", "spec", "containers", 0, "image"}, "nginx:1.27"},
		{"bound image is rewritten by the profile", gpuProfile, []any{"Deployment/code-server", "spec", "template", "spec", "containers", 0, "image"}, "mirror.example.com/dockerhub/library/nginx:1.27"},
		{"resources replace the template's", nil, []any{"Deployment/code-server", "spec", "template", "spec", "containers", 0, "resources"},
			map[string]any{"limits": map[string]any{"cpu": "2", "memory": "4Gi"}}},
		{"env appended after the template's", nil, []any{"Deployment/code-server", "spec", "template", "spec", "containers", 0, "env"},
			[]any{map[string]any{"name": "TZ", "value": "UTC"}, map[string]any{"name": "LOG_LEVEL", "value": "debug"}}},
		{"field", nil, []any{"Deployment/code-server", "spec", "template", "spec", "priorityClassName"}, "high"},
		{"selector untouched", gpuProfile, []any{"Deployment/code-server", "spec", "selector"},
			map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "code-server"}}},
	}
	files, err := render.Manifests(claim(a, fx.srv.URL, v1alpha1.Exposure{}, nil, rawValues(t, values)), fx.snap, render.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	plain := objects(t, files)
	files, err = render.Manifests(claim(a, fx.srv.URL, v1alpha1.Exposure{}, gpuProfile, rawValues(t, values)), fx.snap, render.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	profiled := objects(t, files)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := plain
			if tc.profile != nil {
				objs = profiled
			}
			key := tc.path[0].(string)
			if diff := cmp.Diff(tc.want, get(objs[key], tc.path[1:]...)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	t.Run("generators", func(t *testing.T) {
		var secret, cm map[string]any
		for k, o := range plain {
			switch {
			case strings.HasPrefix(k, "Secret/code-server-auth-"):
				secret = o
			case strings.HasPrefix(k, "ConfigMap/code-server-settings-"):
				cm = o
			}
		}
		if secret == nil || cm == nil {
			t.Fatalf("generated objects missing: %v", keys(plain))
		}
		if got := get(secret, "data", "password"); got != base64.StdEncoding.EncodeToString([]byte("hunter2")) {
			t.Errorf("secret password %v", got)
		}
		if diff := cmp.Diff(map[string]any{"greeting": "a=b\nline two", "limits": `{"max":5}`}, get(cm, "data")); diff != "" {
			t.Errorf("configmap data (-want +got):\n%s", diff)
		}
	})

	t.Run("env replaces a template default", func(t *testing.T) {
		c := claim(a, fx.srv.URL, v1alpha1.Exposure{}, nil, rawValues(t, map[string]any{"tz": "Europe/Paris"}))
		c.Template.Parameters = append(c.Template.Parameters, v1alpha1.ParameterBinding{
			Value: "tz", Kind: v1alpha1.BindingEnv, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "code-server"}, Container: "code-server", EnvName: "TZ"})
		files, err := render.Manifests(c, fx.snap, render.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got := get(objects(t, files)["Deployment/code-server"], "spec", "template", "spec", "containers", 0, "env")
		if diff := cmp.Diff([]any{map[string]any{"name": "TZ", "value": "Europe/Paris"}}, got); diff != "" {
			t.Errorf("env (-want +got):\n%s", diff)
		}
	})
}

// TestClaimErrors: bad values and bad templates are permanent failures.
func TestClaimErrors(t *testing.T) {
	fx := snapshot(t)
	a := apps[0]
	tests := []struct {
		name   string
		edit   func(*workerv1.Claim)
		values map[string]any
		reason string
	}{
		{name: "replicas not a number", values: map[string]any{"replicas": "three"}, reason: workerv1.ReasonInvalidSpec},
		{name: "negative replicas", values: map[string]any{"replicas": -1}, reason: workerv1.ReasonInvalidSpec},
		{name: "image not a string", values: map[string]any{"image": 5}, reason: workerv1.ReasonInvalidSpec},
		{name: "resources with extra keys", values: map[string]any{"resources": map[string]any{"cpu": 1}}, reason: workerv1.ReasonInvalidSpec},
		{name: "exposure not offered", edit: func(c *workerv1.Claim) {
			c.Template.Exposures = nil
			c.Exposure = v1alpha1.Exposure{Type: v1alpha1.ExposureLoadBalancer}
		}, reason: workerv1.ReasonInvalidSpec},
		{name: "binding target not rendered", edit: func(c *workerv1.Claim) {
			c.Template.Parameters[0].Target.Name = "nope"
		}, reason: workerv1.ReasonTemplateRejected},
		{name: "binding container missing", values: map[string]any{"image": "x:1"}, edit: func(c *workerv1.Claim) {
			c.Template.Parameters[1].Container = "sidecar"
		}, reason: workerv1.ReasonTemplateRejected},
		{name: "patch path missing in object", values: map[string]any{"priorityClass": "x"}, edit: func(c *workerv1.Claim) {
			c.Template.Parameters[4].FieldPath = "/spec/nothing/here"
		}, reason: workerv1.ReasonRenderFailed},
		{name: "component escapes", edit: func(c *workerv1.Claim) {
			c.Template.Components = []string{"../elsewhere"}
		}, reason: workerv1.ReasonTemplateRejected},
		{name: "values not an object", edit: func(c *workerv1.Claim) {
			c.Values = rawValues(t, map[string]any{})
			c.Values.Raw = []byte(`[1,2]`)
		}, reason: workerv1.ReasonInvalidSpec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := claim(a, fx.srv.URL, v1alpha1.Exposure{}, nil, rawValues(t, tc.values))
			if tc.edit != nil {
				tc.edit(&c)
			}
			_, err := render.Manifests(c, fx.snap, render.Limits{})
			var fe *failure.Error
			if !errors.As(err, &fe) {
				t.Fatalf("want a classified failure, got %v", err)
			}
			if fe.Reason != tc.reason || !fe.Permanent {
				t.Errorf("got %s permanent=%v, want permanent %s: %v", fe.Reason, fe.Permanent, tc.reason, err)
			}
		})
	}
}
