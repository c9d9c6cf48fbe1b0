package sandbox

import (
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Kueue's webhook manifests (shape of config/components/webhook of v0.17):
// only the Job and Kueue-kind webhooks are kept, each pointed at loopback.
func TestKueueWebhooksOnLoopback(t *testing.T) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mjob.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}]
- name: mpod.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
- name: mworkload.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-kueue-x-k8s-io-v1beta2-workload}
  rules: [{apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta2], operations: [CREATE], resources: [workloads]}]
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := kueueWebhooksOnLoopback(u, 9443, []byte("CA")); err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "kueue-mutating-webhook-configuration" {
		t.Errorf("name %q", u.GetName())
	}
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	var got []map[string]any
	for _, h := range hooks {
		m := h.(map[string]any)
		got = append(got, map[string]any{"name": m["name"], "clientConfig": m["clientConfig"]})
	}
	ca := base64.StdEncoding.EncodeToString([]byte("CA"))
	want := []map[string]any{
		{"name": "mjob.kb.io", "clientConfig": map[string]any{"url": "https://127.0.0.1:9443/mutate-batch-v1-job", "caBundle": ca}},
		{"name": "mworkload.kb.io", "clientConfig": map[string]any{"url": "https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-workload", "caBundle": ca}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("webhooks (-want +got):\n%s", d)
	}
}
