package claims

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/packline/packline/api/v1alpha1"
)

// patchDirectives are the keys Kustomize's strategic merge reads as
// instructions rather than data ("$patch": "delete" removes the object it
// sits in). In a value written into a rendered object by a Field binding
// they would make the render fail with a Kustomize-internal message, or
// delete what the template meant to keep.
var patchDirectives = []string{"$patch", "$retainKeys", "$setElementOrder/", "$deleteFromPrimitiveList/"}

// FieldValues refuses a value bound by a Field binding that holds a patch
// directive anywhere inside it, naming where.
func FieldValues(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate) error {
	return eachBound(c, tpl, v1alpha1.BindingField, func(i int, b v1alpha1.ParameterBinding, v any) string {
		at, key := findDirective(v, "spec.values."+b.Value)
		if at == "" {
			return ""
		}
		return fmt.Sprintf("%s: %q is a Kustomize patch directive, not a value; spec.parameters[%d] of ClaimTemplate %s writes this value into %s %s at %s",
			at, key, i, tpl.Name, b.Target.Kind, b.Target.Name, b.FieldPath)
	})
}

// eachBound calls check once per distinct value that a binding of kind
// puts into the render, with the value as the Claim sets it (absent values
// are skipped), and joins what check finds wrong into one error. Malformed
// values are ValidateValues' to report.
func eachBound(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, kind v1alpha1.BindingKind, check func(i int, b v1alpha1.ParameterBinding, v any) string) error {
	if c.Spec.Values == nil || len(c.Spec.Values.Raw) == 0 {
		return nil
	}
	var values map[string]any
	if err := json.Unmarshal(c.Spec.Values.Raw, &values); err != nil {
		return nil
	}
	var errs []string
	seen := map[string]bool{}
	for i, b := range tpl.Spec.Parameters {
		if b.Kind != kind || seen[b.Value] {
			continue
		}
		seen[b.Value] = true
		v, ok := values[b.Value]
		if !ok {
			continue
		}
		if msg := check(i, b, v); msg != "" {
			errs = append(errs, msg)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// findDirective returns the path of the first directive key in v, and the key.
func findDirective(v any, path string) (string, string) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, d := range patchDirectives {
				if k == d || strings.HasSuffix(d, "/") && strings.HasPrefix(k, d) {
					return path + "." + k, k
				}
			}
			if at, key := findDirective(v[k], path+"."+k); at != "" {
				return at, key
			}
		}
	case []any:
		for i, e := range v {
			if at, key := findDirective(e, fmt.Sprintf("%s[%d]", path, i)); at != "" {
				return at, key
			}
		}
	}
	return "", ""
}
