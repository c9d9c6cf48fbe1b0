package render_test

import (
	"context"
	"encoding/json"
	"github.com/packline/packline/test/fixtures"
	"net"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/render/archive"
	"github.com/packline/packline/jobs/render/source"
	"github.com/packline/packline/test/gitserver"
)

// app describes one fixture app and the template an admin would publish.
type app struct {
	name, service, container string
	hasPVC                   bool
	// mirroredImage is the image after gpuProfile's registry rewrites.
	mirroredImage string
}

var apps = []app{
	{name: "code-server", service: "code-server", container: "code-server", hasPVC: true,
		mirroredImage: "mirror.example.com/dockerhub/codercom/code-server:4.96.4"},
	{name: "vllm-server", service: "vllm-server", container: "vllm", hasPVC: true,
		mirroredImage: "mirror.example.com/dockerhub/vllm/vllm-openai:v0.6.4"},
	{name: "litellm", service: "litellm", container: "litellm",
		mirroredImage: "mirror.example.com/ghcr/berriai/litellm:main-v1.55.0"},
}

func (a app) template(url string) v1alpha1.ClaimTemplateSpec {
	comp := func(c string) string { return "apps/" + a.name + "/components/" + c }
	return v1alpha1.ClaimTemplateSpec{
		Source:  v1alpha1.TemplateSource{URL: url, Ref: "main", Path: "apps/" + a.name + "/base"},
		Kinds:   fixtures.TemplateKinds,
		Service: a.service,
		Exposures: []v1alpha1.ExposureOption{
			{Type: v1alpha1.ExposureClusterIP},
			{Type: v1alpha1.ExposureNodePort, Component: comp("service-nodeport")},
			{Type: v1alpha1.ExposureLoadBalancer, Component: comp("service-loadbalancer")},
			{Type: v1alpha1.ExposureIngress, Component: comp("ingress")},
		},
		Parameters: []v1alpha1.ParameterBinding{
			{Value: "replicas", Kind: v1alpha1.BindingReplicas, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: a.name}},
			{Value: "image", Kind: v1alpha1.BindingImage, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: a.name}, Container: a.container},
			{Value: "resources", Kind: v1alpha1.BindingResources, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: a.name}},
			{Value: "logLevel", Kind: v1alpha1.BindingEnv, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: a.name}, EnvName: "LOG_LEVEL"},
			{Value: "priorityClass", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: a.name}, FieldPath: "/spec/template/spec/priorityClassName"},
		},
		Generators: []v1alpha1.Generator{
			{Kind: "Secret", Name: a.name + "-auth", Values: []string{"password"}},
			{Kind: "ConfigMap", Name: a.name + "-settings", Values: []string{"greeting", "limits"}},
		},
	}
}

// gpuProfile sets every profile field.
var gpuProfile = &v1alpha1.EnvironmentProfileSpec{
	StorageClassName: "fast-ssd",
	IngressClassName: "nginx-internal",
	RuntimeClassName: "nvidia",
	RegistryRewrites: []v1alpha1.RegistryRewrite{
		{From: "docker.io", To: "mirror.example.com/dockerhub"},
		{From: "ghcr.io", To: "mirror.example.com/ghcr"},
	},
	ImagePullSecrets: []corev1.LocalObjectReference{{Name: "mirror-pull"}},
	NodeSelector:     map[string]string{"node.example.com/pool": "gpu"},
	Tolerations:      []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	Labels:           map[string]string{"team": "ml", "cost-center": "42"},
}

func rawValues(t testing.TB, v map[string]any) *apiextensionsv1.JSON {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}

// fixture is the template repository served over smart HTTP, cloned once
// per test binary through the worker's own fetch path.
type fixture struct {
	srv  *gitserver.Server
	rev  source.Revision
	snap *source.Snapshot
}

var (
	fixtureOnce sync.Once
	shared      fixture
)

// serveFixture starts a server for this test (servers die with their test).
func serveFixture(t testing.TB) *gitserver.Server {
	return gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{
		{Dir: gitserver.FixtureDir(t, "templates"), Tags: []string{"v1.0.0"}},
	}}, gitserver.Options{})
}

// snapshot clones the fixture once and shares the in-memory tree; the
// tree is read-only to the renderer.
func snapshot(t testing.TB) fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		srv := serveFixture(t)
		rev, snap, err := source.Fetch(context.Background(), source.Options{URL: srv.URL, Ref: "main", Dir: filepath.Join(t.TempDir(), "src")})
		if err != nil {
			t.Fatalf("fetching fixture: %v", err)
		}
		shared = fixture{srv: srv, rev: rev, snap: snap}
	})
	if shared.snap == nil {
		t.Fatal("fixture clone failed in an earlier test")
	}
	return shared
}

func claim(a app, url string, e v1alpha1.Exposure, p *v1alpha1.EnvironmentProfileSpec, values *apiextensionsv1.JSON) workerv1.Claim {
	return workerv1.Claim{
		Name: "my-" + a.name, Namespace: "team-a",
		Template: a.template(url), Exposure: e, Profile: p, Values: values,
		Target: workerv1.Target{Repository: "registry.example.com/claims/team-a/my-" + a.name, Tag: "v1"},
	}
}

// objects decodes rendered files into "Kind/name" -> object.
func objects(t testing.TB, files []archive.File) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, f := range files {
		var o map[string]any
		if err := yaml.Unmarshal(f.Data, &o); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		md := o["metadata"].(map[string]any)
		out[o["kind"].(string)+"/"+md["name"].(string)] = o
	}
	return out
}

// get walks a decoded object by keys and list indices.
func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

// set is get's writer, creating maps on the way.
func set(o map[string]any, v any, path ...string) {
	for _, k := range path[:len(path)-1] {
		next, ok := o[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			o[k] = next
		}
		o = next
	}
	o[path[len(path)-1]] = v
}

func deepCopy(t testing.TB, v map[string]map[string]any) map[string]map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// closedPort is a loopback host:port nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
