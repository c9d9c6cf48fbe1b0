package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// obj builds an unstructured object from YAML, so invalid shapes that the
// Go types cannot express (missing required fields) reach the apiserver.
func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return u
}

func artifact(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: Artifact\nmetadata: {name: %s, namespace: default}\nspec:\n%s", name, spec)
}

func claim(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: Claim\nmetadata: {name: %s, namespace: default}\nspec:\n%s", name, spec)
}

func template(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: ClaimTemplate\nmetadata: {name: %s}\nspec:\n%s", name, spec)
}

func profile(name, spec string) string {
	return fmt.Sprintf("apiVersion: packline.dev/v1alpha1\nkind: EnvironmentProfile\nmetadata: {name: %s}\nspec:\n%s", name, spec)
}

const kinds = "  kinds: [{group: apps, kind: Deployment}, {kind: Service}]\n"
const hf = "  source: {huggingFace: {repo: Qwen/Qwen2.5-0.5B}}\n"
const target = "  target: {repository: registry.example.com/team/qwen}\n"

func TestSchemaOnCreate(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		name string
		yaml string
		// wantField is empty for a valid object; else the field the error must name.
		wantField string
	}{
		{"artifact hf valid", artifact("hf", hf+target), ""},
		{"artifact signed", artifact("signed", hf+target+"  signing: {keySecretRef: {name: cosign}}\n"), ""},
		{"artifact signing without a Secret name", artifact("signed-noname", hf+target+"  signing: {keySecretRef: {}}\n"), "spec.signing.keySecretRef.name"},
		{"profile signing without a Secret name", profile("signed-noname", "  namespaceSelector: {}\n  signing: {keySecretRef: {name: ''}}\n"), "spec.signing.keySecretRef.name"},
		{"artifact git valid", artifact("git", "  source: {git: {url: 'https://git.example.com/m.git', ref: v1, path: models/a}}\n"+target+"  format: ModelPack\n"), ""},
		{"artifact http with sha", artifact("http", "  source: {http: {url: 'https://x.example.com/m.tgz', sha256: "+strings.Repeat("a", 64)+"}}\n"+target), ""},
		{"artifact oci by digest", artifact("oci", "  source: {oci: {reference: 'ghcr.io/a/b@sha256:"+strings.Repeat("0", 64)+"'}}\n"+target), ""},
		{"artifact volume", artifact("vol", "  source: {volume: {claimName: models, path: llama}}\n"+target+"  retryLimit: 5\n  timeout: 2h\n"), ""},
		{"artifact 63-char name", artifact(long[:63], hf+target), ""},
		{"artifact two sources", artifact("two", "  source: {huggingFace: {repo: a/b}, http: {url: 'https://x/y'}}\n"+target), "spec.source"},
		{"artifact no source", artifact("none", "  source: {}\n"+target), "spec.source"},
		{"artifact bad repository", artifact("badrepo", hf+"  target: {repository: 'Registry.Example.com/UPPER'}\n"), "spec.target.repository"},
		{"artifact missing repository", artifact("norepo", hf+"  target: {tag: v1}\n"), "spec.target.repository"},
		{"artifact bad tag", artifact("badtag", hf+"  target: {repository: r.example.com/a, tag: '-bad:tag'}\n"), "spec.target.tag"},
		{"artifact name too long", artifact(long, hf+target), "metadata.name"},
		{"artifact retryLimit too high", artifact("rl", hf+target+"  retryLimit: 100\n"), "spec.retryLimit"},
		{"artifact timeout too short", artifact("to", hf+target+"  timeout: 10s\n"), "spec.timeout"},
		{"artifact bad format", artifact("fmt", hf+target+"  format: Docker\n"), "spec.format"},
		{"artifact bad sha256", artifact("sha", "  source: {http: {url: 'https://x/y', sha256: abc}}\n"+target), "spec.source.http.sha256"},
		{"artifact git path traversal", artifact("trav", "  source: {git: {url: 'https://g/r', path: '../etc'}}\n"+target), "spec.source.git.path"},
		{"artifact hf bad repo", artifact("hfbad", "  source: {huggingFace: {repo: 'no-slash'}}\n"+target), "spec.source.huggingFace.repo"},
		{"claim clusterip valid", claim("c1", "  templateRef: {name: code-server}\n  values: {replicas: 2}\n"), ""},
		{"claim nodeport valid", claim("c2", "  templateRef: {name: code-server}\n  exposure: {type: NodePort, nodePort: 30080}\n"), ""},
		{"claim nodeport out of range", claim("c3", "  templateRef: {name: code-server}\n  exposure: {type: NodePort, nodePort: 8080}\n"), "spec.exposure.nodePort"},
		{"claim nodePort with ClusterIP", claim("c4", "  templateRef: {name: code-server}\n  exposure: {type: ClusterIP, nodePort: 30080}\n"), "spec.exposure.nodePort"},
		{"claim ingress without host", claim("c5", "  templateRef: {name: code-server}\n  exposure: {type: Ingress}\n"), "spec.exposure.host"},
		{"claim host with LoadBalancer", claim("c6", "  templateRef: {name: code-server}\n  exposure: {type: LoadBalancer, host: a.example.com}\n"), "spec.exposure.host"},
		{"claim missing templateRef", claim("c7", "  values: {a: 1}\n"), "spec.templateRef"},
		{"claim bad exposure type", claim("c8", "  templateRef: {name: t}\n  exposure: {type: HostPort}\n"), "spec.exposure.type"},
		{"template valid", template("code-server", "  source: {url: 'https://git.example.com/tpl.git', ref: main, path: apps/code-server/base}\n"+kinds+"  valuesSchema: {type: object, properties: {replicas: {type: integer}}}\n  exposures: [{type: ClusterIP}, {type: Ingress, component: apps/code-server/components/ingress}]\n  parameters: [{value: replicas, kind: Replicas, target: {kind: Deployment, name: code-server}}]\n"), ""},
		{"template missing path", template("nopath", "  source: {url: 'https://git.example.com/tpl.git'}\n"), "spec.source.path"},
		{"template bad url", template("badurl", "  source: {url: 'file:///etc', path: a}\n"+kinds), "spec.source.url"},
		{"template url with password", template("userinfo", "  source: {url: 'https://bob:s3cret@git.example.com/t.git', path: a}\n"+kinds), "spec.source.url"},
		{"template url with token", template("token", "  source: {url: 'https://ghp_abc@git.example.com/t.git', path: a}\n"+kinds), "spec.source.url"},
		{"template ssh url with password", template("sshpw", "  source: {url: 'ssh://git:pw@git.example.com/t.git', path: a}\n"+kinds), "spec.source.url"},
		{"template ssh url with user", template("sshuser", "  source: {url: 'ssh://git@git.example.com/t.git', path: a, secretRef: {name: deploy-key}}\n"+kinds), ""},
		{"template without kinds", template("nokinds", "  source: {url: 'https://g/t', path: a}\n"), "spec.kinds"},
		{"template field binding needs fieldPath", template("fp", "  source: {url: 'https://g/t', path: a}\n"+kinds+"  parameters: [{value: x, kind: Field, target: {kind: Deployment, name: d}}]\n"), "spec.parameters[0].fieldPath"},
		{"template duplicate exposure", template("dup", "  source: {url: 'https://g/t', path: a}\n"+kinds+"  exposures: [{type: Ingress}, {type: Ingress}]\n"), "spec.exposures[1]"},
		{"profile valid", profile("gpu", "  namespaceSelector: {matchLabels: {site: a}}\n  priority: 10\n  storageClassName: fast\n  runtimeClassName: nvidia\n  tolerations: [{key: gpu, operator: Exists}]\n"), ""},
		{"profile negative priority", profile("neg", "  namespaceSelector: {}\n  priority: -1\n"), "spec.priority"},
		{"profile missing selector", profile("nosel", "  priority: 1\n"), "spec.namespaceSelector"},
		{"profile selector In without values", profile("in-novals", "  namespaceSelector: {matchExpressions: [{key: a, operator: In}]}\n"), "spec.namespaceSelector"},
		{"profile selector unknown operator", profile("badop", "  namespaceSelector: {matchExpressions: [{key: a, operator: Gt, values: ['1']}]}\n"), "spec.namespaceSelector"},
		{"profile selector Exists with values", profile("exists-vals", "  namespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}\n"), "spec.namespaceSelector"},
		{"profile selector valid expressions", profile("exprs", "  namespaceSelector: {matchExpressions: [{key: a, operator: In, values: [x]}, {key: b, operator: DoesNotExist}]}\n"), ""},
		{"template selector In without values", template("tplsel", "  source: {url: 'https://g/t', path: a}\n"+kinds+"  access: {namespaceSelector: {matchExpressions: [{key: a, operator: NotIn}]}}\n"), "spec.access.namespaceSelector"},
		{"profile toleration unknown operator", profile("tolop", "  namespaceSelector: {}\n  tolerations: [{key: gpu, operator: Maybe}]\n"), "spec.tolerations"},
		{"profile toleration unknown effect", profile("toleff", "  namespaceSelector: {}\n  tolerations: [{key: gpu, operator: Exists, effect: Sometimes}]\n"), "spec.tolerations"},
		{"profile toleration Exists with value", profile("tolval", "  namespaceSelector: {}\n  tolerations: [{key: gpu, operator: Exists, value: 'yes'}]\n"), "spec.tolerations"},
		{"profile valid tolerations", profile("tolok", "  namespaceSelector: {}\n  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}, {key: zone, operator: Equal, value: a}]\n"), ""},
		{"profile zero workspace", profile("wszero", "  namespaceSelector: {}\n  workspaceSize: '0'\n"), "spec.workspaceSize"},
		{"artifact negative workspace", artifact("wsneg", hf+target+"  workspace: {size: -1Gi}\n"), "spec.workspace.size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), obj(t, tc.yaml))
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
		name, create, field string
		mutate              func(u *unstructured.Unstructured)
	}{
		{"claim templateRef", claim("imm-claim", "  templateRef: {name: a}\n"), "spec.templateRef",
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "b", "spec", "templateRef", "name")
			}},
		{"artifact workspace", artifact("imm-ws", hf+target+"  workspace: {size: 1Gi}\n"), "spec.workspace",
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "2Gi", "spec", "workspace", "size")
			}},
		{"artifact workspace removed", artifact("imm-ws-rm", hf+target+"  workspace: {size: 1Gi}\n"), "spec.workspace",
			func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "workspace") }},
		{"claim workspace added", claim("imm-ws-add", "  templateRef: {name: a}\n"), "spec.workspace",
			func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "1Gi", "spec", "workspace", "size")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := obj(t, tc.create)
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
