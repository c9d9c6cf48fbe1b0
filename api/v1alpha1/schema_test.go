package v1alpha1_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/test/testenv"
	"github.com/packline/packline/test/wrappers"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// obj builds an unstructured object from YAML, so invalid shapes that the
// Go types cannot express (missing required fields, two sources at once)
// reach the apiserver. Everything else is built with test/wrappers.
func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return u
}

func artifactYAML(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: Artifact\nmetadata: {name: %s, namespace: default}\nspec:\n%s", name, spec)
}

func claimYAML(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: Claim\nmetadata: {name: %s, namespace: default}\nspec:\n%s", name, spec)
}

func templateYAML(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: ClaimTemplate\nmetadata: {name: %s}\nspec:\n%s", name, spec)
}

func profileYAML(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: EnvironmentProfile\nmetadata: {name: %s}\nspec:\n%s", name, spec)
}

const kinds = "  kinds: [{group: apps, kind: Deployment}, {kind: Service}]\n"
const target = "  target: {repository: registry.example.com/team/qwen}\n"

// typed turns a built object into the unstructured form the tables create.
func typed(t *testing.T, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(reflect.TypeOf(o).Elem().Name()))
	return u
}

func TestSchemaOnCreate(t *testing.T) {
	long := strings.Repeat("a", 64)
	const ns = "default"
	art := func(name string) *wrappers.ArtifactWrapper {
		return wrappers.MakeArtifact(name, ns).HF("Qwen/Qwen2.5-0.5B").Repository("registry.example.com/team/qwen")
	}
	claim := func(name string) *wrappers.ClaimWrapper { return wrappers.MakeClaim(name, ns, "code-server") }
	tpl := func(name, url string) *wrappers.ClaimTemplateWrapper {
		return wrappers.MakeClaimTemplate(name).Source(url, "", "a").
			Kinds(v1alpha1.RenderedKind{Group: "apps", Kind: "Deployment"}, v1alpha1.RenderedKind{Kind: "Service"})
	}
	profile := wrappers.MakeEnvironmentProfile
	gpu := map[string]string{"site": "a"}
	toleration := func(key, op, value, effect string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOperator(op), Value: value, Effect: corev1.TaintEffect(effect)}
	}
	cases := []struct {
		name string
		obj  *unstructured.Unstructured
		// wantField is empty for a valid object; else the field the error must name.
		wantField string
	}{
		{"artifact hf valid", typed(t, art("hf").Obj()), ""},
		{"artifact git valid", typed(t, art("git").Git("https://git.example.com/m.git", "v1", "models/a").Format(v1alpha1.FormatModelPack).Obj()), ""},
		{"artifact http with sha", typed(t, art("http").HTTP("https://x.example.com/m.tgz").SHA256(strings.Repeat("a", 64)).Obj()), ""},
		{"artifact oci by digest", typed(t, art("oci").OCI("ghcr.io/a/b@sha256:"+strings.Repeat("0", 64)).Obj()), ""},
		// YAML where the Go types cannot say it: a volume path, two
		// sources, a missing required field.
		{"artifact volume", obj(t, artifactYAML("vol", "  source: {volume: {claimName: models, path: llama}}\n"+target+"  retryLimit: 5\n  timeout: 2h\n")), ""},
		{"artifact 63-char name", typed(t, art(long[:63]).Obj()), ""},
		{"artifact two sources", obj(t, artifactYAML("two", "  source: {huggingFace: {repo: a/b}, http: {url: 'https://x/y'}}\n"+target)), "spec.source"},
		{"artifact no source", obj(t, artifactYAML("none", "  source: {}\n"+target)), "spec.source"},
		{"artifact bad repository", typed(t, art("badrepo").Repository("Registry.Example.com/UPPER").Obj()), "spec.target.repository"},
		{"artifact missing repository", typed(t, art("norepo").Repository("").Obj()), "spec.target.repository"},
		{"artifact bad tag", typed(t, art("badtag").Tag("-bad:tag").Obj()), "spec.target.tag"},
		{"artifact name too long", typed(t, art(long).Obj()), "metadata.name"},
		{"artifact retryLimit too high", typed(t, art("rl").RetryLimit(100).Obj()), "spec.retryLimit"},
		{"artifact timeout too short", typed(t, art("to").Timeout(10*time.Second).Obj()), "spec.timeout"},
		{"artifact bad format", typed(t, art("fmt").Format("Docker").Obj()), "spec.format"},
		{"artifact zstd", obj(t, artifactYAML("zstd", "  source: {huggingFace: {repo: a/b}}\n"+target+"  compression: zstd\n")), ""},
		{"artifact bad compression", obj(t, artifactYAML("lz4", "  source: {huggingFace: {repo: a/b}}\n"+target+"  compression: lz4\n")), "spec.compression"},
		{"artifact bad sha256", typed(t, art("sha").HTTP("https://x/y").SHA256("abc").Obj()), "spec.source.http.sha256"},
		{"artifact git path traversal", typed(t, art("trav").Git("https://g/r", "", "../etc").Obj()), "spec.source.git.path"},
		{"artifact hf bad repo", typed(t, art("hfbad").HF("no-slash").Obj()), "spec.source.huggingFace.repo"},
		{"artifact negative workspace", typed(t, art("wsneg").Workspace("-1Gi").Obj()), "spec.workspace.size"},
		{"claim clusterip valid", typed(t, claim("c1").Values(`{"replicas":2}`).Obj()), ""},
		{"claim nodeport valid", typed(t, claim("c2").NodePort(30080).Obj()), ""},
		{"claim nodeport out of range", typed(t, claim("c3").NodePort(8080).Obj()), "spec.exposure.nodePort"},
		{"claim nodePort with ClusterIP", typed(t, claim("c4").NodePort(30080).Exposure(v1alpha1.ExposureClusterIP).Obj()), "spec.exposure.nodePort"},
		{"claim ingress without host", typed(t, claim("c5").Exposure(v1alpha1.ExposureIngress).Obj()), "spec.exposure.host"},
		{"claim host with LoadBalancer", typed(t, claim("c6").Exposure(v1alpha1.ExposureLoadBalancer).Host("a.example.com").Obj()), "spec.exposure.host"},
		{"claim missing templateRef", obj(t, claimYAML("c7", "  values: {a: 1}\n")), "spec.templateRef"},
		{"claim bad exposure type", typed(t, claim("c8").Exposure("HostPort").Obj()), "spec.exposure.type"},
		{"template valid", typed(t, wrappers.MakeClaimTemplate("code-server").Exposures(v1alpha1.ExposureClusterIP).
			Expose(v1alpha1.ExposureIngress, "apps/code-server/components/ingress").Obj()), ""},
		{"template missing path", obj(t, templateYAML("nopath", "  source: {url: 'https://git.example.com/tpl.git'}\n")), "spec.source.path"},
		{"template bad url", typed(t, tpl("badurl", "file:///etc").Obj()), "spec.source.url"},
		{"template url with password", typed(t, tpl("userinfo", "https://bob:s3cret@git.example.com/t.git").Obj()), "spec.source.url"},
		{"template url with token", typed(t, tpl("token", "https://ghp_abc@git.example.com/t.git").Obj()), "spec.source.url"},
		{"template ssh url with password", typed(t, tpl("sshpw", "ssh://git:pw@git.example.com/t.git").Obj()), "spec.source.url"},
		{"template ssh url with user", typed(t, tpl("sshuser", "ssh://git@git.example.com/t.git").Private("deploy-key", "").Obj()), ""},
		{"template without kinds", typed(t, tpl("nokinds", "https://g/t").Kinds().Obj()), "spec.kinds"},
		{"template field binding needs fieldPath", typed(t, tpl("fp", "https://g/t").Parameters(v1alpha1.ParameterBinding{
			Value: "x", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"}}).Obj()), "spec.parameters[0].fieldPath"},
		{"template artifact binding with mount InitPull", typed(t, tpl("initpull", "https://g/t").Parameters(v1alpha1.ParameterBinding{
			Value: "model", Kind: v1alpha1.BindingArtifact, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"},
			FieldPath: "/spec/template/spec/volumes/0/image/reference", Mount: v1alpha1.ArtifactMountInitPull}).Obj()), ""},
		{"template mount InitPull on a Field binding", typed(t, tpl("initpullfield", "https://g/t").Parameters(v1alpha1.ParameterBinding{
			Value: "model", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"},
			FieldPath: "/spec/template/spec/volumes/0/image/reference", Mount: v1alpha1.ArtifactMountInitPull}).Obj()), "spec.parameters[0].mount"},
		{"template unknown mount", typed(t, tpl("mountx", "https://g/t").Parameters(v1alpha1.ParameterBinding{
			Value: "model", Kind: v1alpha1.BindingArtifact, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"},
			FieldPath: "/spec/template/spec/volumes/0/image/reference", Mount: "Copy"}).Obj()), "spec.parameters[0].mount"},
		{"template duplicate exposure", typed(t, tpl("dup", "https://g/t").Exposures(v1alpha1.ExposureIngress, v1alpha1.ExposureIngress).Obj()), "spec.exposures[1]"},
		{"template selector In without values", obj(t, templateYAML("tplsel", "  source: {url: 'https://g/t', path: a}\n"+kinds+"  access: {namespaceSelector: {matchExpressions: [{key: a, operator: NotIn}]}}\n")), "spec.access.namespaceSelector"},
		{"profile valid", typed(t, profile("gpu", gpu).Priority(10).StorageClass("fast").RuntimeClass("nvidia").
			Tolerations(toleration("gpu", "Exists", "", "")).Obj()), ""},
		{"profile negative priority", typed(t, profile("neg", nil).Priority(-1).Obj()), "spec.priority"},
		{"profile missing selector", obj(t, profileYAML("nosel", "  priority: 1\n")), "spec.namespaceSelector"},
		{"profile selector In without values", typed(t, profile("in-novals", nil).Match(metav1.LabelSelectorRequirement{Key: "a", Operator: metav1.LabelSelectorOpIn}).Obj()), "spec.namespaceSelector"},
		{"profile selector unknown operator", typed(t, profile("badop", nil).Match(metav1.LabelSelectorRequirement{Key: "a", Operator: "Gt", Values: []string{"1"}}).Obj()), "spec.namespaceSelector"},
		{"profile selector Exists with values", typed(t, profile("exists-vals", nil).Match(metav1.LabelSelectorRequirement{Key: "a", Operator: metav1.LabelSelectorOpExists, Values: []string{"x"}}).Obj()), "spec.namespaceSelector"},
		{"profile selector valid expressions", typed(t, profile("exprs", nil).
			Match(metav1.LabelSelectorRequirement{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"x"}}).
			Match(metav1.LabelSelectorRequirement{Key: "b", Operator: metav1.LabelSelectorOpDoesNotExist}).Obj()), ""},
		{"profile toleration unknown operator", typed(t, profile("tolop", nil).Tolerations(toleration("gpu", "Maybe", "", "")).Obj()), "spec.tolerations"},
		{"profile toleration unknown effect", typed(t, profile("toleff", nil).Tolerations(toleration("gpu", "Exists", "", "Sometimes")).Obj()), "spec.tolerations"},
		{"profile toleration Exists with value", typed(t, profile("tolval", nil).Tolerations(toleration("gpu", "Exists", "yes", "")).Obj()), "spec.tolerations"},
		{"profile valid tolerations", typed(t, profile("tolok", nil).Tolerations(toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"), toleration("zone", "Equal", "a", "")).Obj()), ""},
		{"profile zero workspace", typed(t, profile("wszero", nil).WorkspaceSize("0").Obj()), "spec.workspaceSize"},
		{"artifact signed", obj(t, artifactYAML("signed", "  source: {huggingFace: {repo: a/b}}\n"+target+"  signing: {keySecretRef: {name: cosign}}\n")), ""},
		{"artifact signing without a Secret name", obj(t, artifactYAML("signed-noname", "  source: {huggingFace: {repo: a/b}}\n"+target+"  signing: {keySecretRef: {}}\n")), "spec.signing.keySecretRef.name"},
		// Every Duration is checked by CEL, as Flux checks the ones it gets:
		// a value metav1.Duration cannot decode would stop the manager's
		// cache, and one Flux refuses would fail the delivery later.
		{"claim flux interval not a duration", obj(t, claimYAML("d1", "  templateRef: {name: a}\n  delivery: {flux: {interval: soon}}\n")), "spec.delivery.flux.interval"},
		{"claim flux interval negative", obj(t, claimYAML("d2", "  templateRef: {name: a}\n  delivery: {flux: {interval: -5m}}\n")), "spec.delivery.flux.interval"},
		{"claim flux interval zero", obj(t, claimYAML("d3", "  templateRef: {name: a}\n  delivery: {flux: {interval: 0s}}\n")), "spec.delivery.flux.interval"},
		{"claim flux timeout zero", obj(t, claimYAML("d4", "  templateRef: {name: a}\n  delivery: {flux: {timeout: 0s}}\n")), "spec.delivery.flux.timeout"},
		{"claim flux timeout 1ns", obj(t, claimYAML("d5", "  templateRef: {name: a}\n  delivery: {flux: {timeout: 1ns}}\n")), "spec.delivery.flux.timeout"},
		{"claim flux durations valid", obj(t, claimYAML("d6", "  templateRef: {name: a}\n  delivery: {flux: {timeout: 90s, interval: 1h30m}}\n")), ""},
		{"profile flux interval not a duration", obj(t, profileYAML("d7", "  namespaceSelector: {}\n  delivery: {flux: {interval: soon}}\n")), "spec.delivery.flux.interval"},
		{"profile flux interval negative", obj(t, profileYAML("d8", "  namespaceSelector: {}\n  delivery: {flux: {interval: -1m}}\n")), "spec.delivery.flux.interval"},
		{"profile flux timeout zero", obj(t, profileYAML("d9", "  namespaceSelector: {}\n  delivery: {flux: {timeout: 0s}}\n")), "spec.delivery.flux.timeout"},
		{"profile flux durations valid", obj(t, profileYAML("d10", "  namespaceSelector: {}\n  delivery: {flux: {timeout: 2m, interval: 500ms}}\n")), ""},
		{"artifact timeout not a duration", obj(t, artifactYAML("d11", "  source: {huggingFace: {repo: a/b}}\n"+target+"  timeout: soon\n")), "spec.timeout"},
		{"artifact verifyInterval not a duration", obj(t, artifactYAML("d12", "  source: {huggingFace: {repo: a/b}}\n"+target+"  verifyInterval: soon\n")), "spec.verifyInterval"},
		{"claim timeout not a duration", obj(t, claimYAML("d13", "  templateRef: {name: a}\n  timeout: soon\n")), "spec.timeout"},
		{"template fieldPath with a bad escape", typed(t, tpl("fp-tilde", "https://g/t").Parameters(v1alpha1.ParameterBinding{
			Value: "x", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"}, FieldPath: "/metadata/annotations/a~b"}).Obj()), "spec.parameters[0].fieldPath"},
		{"template fieldPath with an empty segment", typed(t, tpl("fp-empty", "https://g/t").Parameters(v1alpha1.ParameterBinding{
			Value: "x", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"}, FieldPath: "/spec//replicas"}).Obj()), "spec.parameters[0].fieldPath"},
		{"template fieldPath with escapes", typed(t, tpl("fp-ok", "https://g/t").Parameters(v1alpha1.ParameterBinding{
			Value: "x", Kind: v1alpha1.BindingField, Target: v1alpha1.ObjectSelector{Kind: "Deployment", Name: "d"}, FieldPath: "/metadata/annotations/example.com~1a~0b"}).Obj()), ""},
		{"profile signing without a Secret name", obj(t, profileYAML("signed-noname", "  namespaceSelector: {}\n  signing: {keySecretRef: {name: ''}}\n")), "spec.signing.keySecretRef.name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tc.obj)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("valid object rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid object accepted; want an error naming %s", tc.wantField)
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Fatalf("error does not name %s:\n%v", tc.wantField, err)
			}
		})
	}
}

func TestImmutableFields(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		create *unstructured.Unstructured
		field  string
		mutate func(u *unstructured.Unstructured)
	}{
		{"claim templateRef", typed(t, wrappers.MakeClaim("imm-claim", "default", "a").Obj()), "spec.templateRef",
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "b", "spec", "templateRef", "name")
			}},
		{"artifact workspace", typed(t, wrappers.MakeArtifact("imm-ws", "default").Workspace("1Gi").Obj()), "spec.workspace",
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "2Gi", "spec", "workspace", "size")
			}},
		{"artifact workspace removed", typed(t, wrappers.MakeArtifact("imm-ws-rm", "default").Workspace("1Gi").Obj()), "spec.workspace",
			func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "workspace") }},
		{"claim workspace added", typed(t, wrappers.MakeClaim("imm-ws-add", "default", "a").Obj()), "spec.workspace",
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "1Gi", "spec", "workspace", "size")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.create
			if err := env.Client.Create(ctx, u); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.mutate(u)
			err := env.Client.Update(ctx, u)
			if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "immutable") {
				t.Fatalf("update error = %v, want %s is immutable", err, tc.field)
			}
		})
	}
}

// A refusal never quotes a field that may hold a credential: the API
// server's Invalid-value errors (pattern, format, and CEL rules without a
// reason) print the value, and Flux copies them into its Ready message and
// events. Each such field gets a value carrying a marker password that
// breaks a rule; the error must name the field and not hold the marker.
func TestCredentialsNeverEchoed(t *testing.T) {
	const marker = "PASSWORD-MARKER-7f3a"
	withCred := "robot:" + marker + "@"
	cases := []struct {
		name  string
		obj   *unstructured.Unstructured
		field string
	}{
		{"template https url with userinfo", obj(t, templateYAML("cred1", "  source: {url: 'http://"+withCred+"git.example.com/t.git', path: a}\n"+kinds)), "spec.source.url"},
		{"template ssh url with password", obj(t, templateYAML("cred2", "  source: {url: 'ssh://git:"+marker+"@git.example.com/t.git', path: a}\n"+kinds)), "spec.source.url"},
		{"template url without scheme", obj(t, templateYAML("cred3", "  source: {url: '"+withCred+"git.example.com:t.git', path: a}\n"+kinds)), "spec.source.url"},
		{"artifact git url without scheme", obj(t, artifactYAML("cred4", "  source: {git: {url: '"+withCred+"git.example.com:m.git'}}\n"+target)), "spec.source.git.url"},
		{"artifact http url with another scheme", obj(t, artifactYAML("cred5", "  source: {http: {url: 'ftp://"+withCred+"files.example.com/m.bin'}}\n"+target)), "spec.source.http.url"},
		{"artifact hf endpoint with another scheme", obj(t, artifactYAML("cred6", "  source: {huggingFace: {repo: a/b, endpoint: 'ftp://"+withCred+"hf.example.com'}}\n"+target)), "spec.source.huggingFace.endpoint"},
		{"artifact hf repo", obj(t, artifactYAML("cred7", "  source: {huggingFace: {repo: 'https://"+withCred+"huggingface.co/a/b'}}\n"+target)), "spec.source.huggingFace.repo"},
		{"artifact oci reference", obj(t, artifactYAML("cred8", "  source: {oci: {reference: '"+withCred+"ghcr.io/a/b:v1'}}\n"+target)), "spec.source.oci.reference"},
		{"artifact target repository", obj(t, artifactYAML("cred9", "  source: {huggingFace: {repo: a/b}}\n  target: {repository: '"+withCred+"registry.example.com/team/m'}\n")), "spec.target.repository"},
		{"claim target repository", obj(t, claimYAML("cred10", "  templateRef: {name: a}\n  target: {repository: '"+withCred+"registry.example.com/team/m'}\n")), "spec.target.repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tc.obj)
			if err == nil {
				t.Fatalf("accepted; want an error naming %s", tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error does not name %s: %v", tc.field, err)
			}
			if strings.Contains(err.Error(), marker) {
				t.Errorf("error echoes the credential: %v", err)
			}
		})
	}
}
