package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Placeholders in config/samples that the sandbox points at its own
// servers, so the samples read like a real cluster's and still run here.
const (
	SampleRegistry = "registry.example.com"
	SampleGitURL   = "https://git.example.com/platform/workloads.git"
)

// Sample is one object from config/samples, rewritten for the sandbox.
type Sample struct {
	File string
	Obj  *unstructured.Unstructured
}

// Samples reads config/samples in kustomization order and rewrites them:
// the registry host becomes the sandbox registry (over plain HTTP), the
// Hugging Face endpoint the fixture hub, and the template repository
// gitURL (skipped with its Claims when gitURL is empty).
func (s *Sandbox) Samples(gitURL string) ([]Sample, error) {
	dir := filepath.Join(s.o.RepoRoot, "config", "samples")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, err
	}
	var out []Sample
	for _, f := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		text := strings.ReplaceAll(string(b), SampleRegistry, s.Registry.Host)
		if gitURL != "" {
			text = strings.ReplaceAll(text, SampleGitURL, gitURL)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		switch u.GetKind() {
		case "Artifact":
			_ = unstructured.SetNestedField(u.Object, true, "spec", "target", "plainHTTP")
			if _, ok, _ := unstructured.NestedMap(u.Object, "spec", "source", "huggingFace"); ok {
				_ = unstructured.SetNestedField(u.Object, s.HF.URL, "spec", "source", "huggingFace", "endpoint")
			}
		case "ClaimTemplate", "Claim":
			if gitURL == "" {
				continue
			}
			if u.GetKind() == "Claim" {
				_ = unstructured.SetNestedField(u.Object, true, "spec", "target", "plainHTTP")
			}
		}
		out = append(out, Sample{File: f, Obj: u})
	}
	return out, nil
}

// Apply creates or updates obj with server-side apply.
func (s *Sandbox) Apply(ctx context.Context, obj *unstructured.Unstructured) error {
	return applyTo(ctx, s.Client, obj)
}

// applyTo server-side-applies obj with c, as the sandbox's field owner.
func applyTo(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return c.Patch(ctx, obj, client.Apply, client.FieldOwner("packline-sandbox"), client.ForceOwnership)
}

// TenantLabels are the labels the ClaimTemplate sample's access rule wants
// on a namespace before its Claims may use the template.
var TenantLabels = map[string]string{"packline.dev/tenant": "true"}

// LabelNamespace merges labels into namespace ns.
func (s *Sandbox) LabelNamespace(ctx context.Context, ns string, labels map[string]string) error {
	patch := map[string]any{"metadata": map[string]any{"labels": labels}}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	obj := &corev1.Namespace{}
	obj.Name = ns
	return s.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, b))
}
