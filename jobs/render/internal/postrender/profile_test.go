package postrender

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"

	"github.com/packline/packline/api/v1alpha1"
)

const workloads = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  template:
    spec:
      runtimeClassName: template-choice
      containers:
        - name: db
          image: postgres:16
      volumes:
        - name: model
          image:
            reference: ghcr.io/org/model@sha256:1111111111111111111111111111111111111111111111111111111111111111
  volumeClaimTemplates:
    - metadata:
        name: data
      spec:
        storageClassName: template-choice
        resources:
          requests:
            storage: 1Gi
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: backup
spec:
  schedule: "@daily"
  jobTemplate:
    spec:
      template:
        spec:
          tolerations:
            - key: nvidia.com/gpu
              operator: Exists
              effect: NoSchedule
          containers:
            - name: backup
              image: ghcr.io/org/backup:1
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: untouched
data:
  image: docker.io/not/an-image
`

// TestProfileOnEveryWorkloadKind: the profile reaches pod specs wherever
// the kind keeps them, overrides the template's choices, does not double
// a toleration the template already has, and leaves other objects alone.
func TestProfileOnEveryWorkloadKind(t *testing.T) {
	m, err := resmap.NewFactory(provider.NewDefaultDepProvider().GetResourceFactory()).NewResMapFromBytes([]byte(workloads))
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.EnvironmentProfileSpec{
		StorageClassName: "fast",
		RuntimeClassName: "nvidia",
		RegistryRewrites: []v1alpha1.RegistryRewrite{{From: "docker.io", To: "mirror.example.com/hub"}, {From: "ghcr.io", To: "mirror.example.com/ghcr"}},
		Tolerations:      []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	if err := Profile(m, p); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, r := range m.Resources() {
		o, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		got[r.GetKind()] = o
	}
	at := func(o any, path ...any) any {
		for _, k := range path {
			switch k := k.(type) {
			case string:
				o = o.(map[string]any)[k]
			case int:
				o = o.([]any)[k]
			}
		}
		return o
	}
	sts, cron, cm := got["StatefulSet"], got["CronJob"], got["ConfigMap"]
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"statefulset runtime class overridden", at(sts, "spec", "template", "spec", "runtimeClassName"), "nvidia"},
		{"statefulset image rewritten", at(sts, "spec", "template", "spec", "containers", 0, "image"), "mirror.example.com/hub/library/postgres:16"},
		{"statefulset image volume rewritten (the node pulls it as it pulls images)", at(sts, "spec", "template", "spec", "volumes", 0, "image", "reference"),
			"mirror.example.com/ghcr/org/model@sha256:1111111111111111111111111111111111111111111111111111111111111111"},
		{"claim template storage class", at(sts, "spec", "volumeClaimTemplates", 0, "spec", "storageClassName"), "fast"},
		{"cronjob runtime class", at(cron, "spec", "jobTemplate", "spec", "template", "spec", "runtimeClassName"), "nvidia"},
		{"cronjob image rewritten", at(cron, "spec", "jobTemplate", "spec", "template", "spec", "containers", 0, "image"), "mirror.example.com/ghcr/org/backup:1"},
		{"toleration not doubled", len(at(cron, "spec", "jobTemplate", "spec", "template", "spec", "tolerations").([]any)), 1},
		{"configmap untouched", cm, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "untouched"},
			"data": map[string]any{"image": "docker.io/not/an-image"}}},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
