// Package config tests the generated manifests: CRD documentation, RBAC
// least privilege, and that the samples are accepted by a real apiserver.
package config

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/packline/packline/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// TestCRDFieldsAreDocumented fails on any spec field without a description:
// it is what `kubectl explain` shows users.
func TestCRDFieldsAreDocumented(t *testing.T) {
	files, _ := filepath.Glob("crd/bases/*.yaml")
	if len(files) != 4 {
		t.Fatalf("want 4 CRDs, found %v", files)
	}
	for _, f := range files {
		var crd apiextensionsv1.CustomResourceDefinition
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			var missing []string
			walkSchema("spec", spec, &missing)
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Errorf("%s %s: fields without description:\n  %s", crd.Name, v.Name, strings.Join(missing, "\n  "))
			}
		}
	}
}

func walkSchema(path string, s apiextensionsv1.JSONSchemaProps, missing *[]string) {
	for name, p := range s.Properties {
		child := path + "." + name
		if strings.TrimSpace(p.Description) == "" {
			*missing = append(*missing, child)
		}
		walkSchema(child, p, missing)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(path+"[]", *s.Items.Schema, missing)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(path+"{}", *s.AdditionalProperties.Schema, missing)
	}
}

// TestManagerHasNoSecretAccess: the manager must never be able to read
// credentials; they reach worker pods only by reference.
func TestManagerHasNoSecretAccess(t *testing.T) {
	b, err := os.ReadFile("rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) == 0 {
		t.Fatal("generated role has no rules")
	}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "secrets" || res == "*" {
				t.Errorf("manager role grants %v on %q in groups %v", r.Verbs, res, r.APIGroups)
			}
		}
	}
}

// TestSamplesAreAccepted applies every sample to a real apiserver.
func TestSamplesAreAccepted(t *testing.T) {
	files, _ := filepath.Glob("samples/*.yaml")
	kinds := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "kustomization.yaml") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := env.Client.Create(context.Background(), u); err != nil {
			t.Errorf("%s rejected: %v", f, err)
		}
		kinds[u.GetKind()] = true
	}
	for _, k := range []string{"Artifact", "Claim", "ClaimTemplate", "EnvironmentProfile"} {
		if !kinds[k] {
			t.Errorf("no sample of kind %s", k)
		}
	}
}
