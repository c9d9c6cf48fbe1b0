package overlay

import (
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/packline/packline/api/v1alpha1"
)

// bindings turns Replicas and Field bindings into JSON6902 patches on their
// target. Bindings whose value the claim does not set keep the template's
// default. Image, Resources and Env bindings address a container by name,
// which JSON6902 cannot do (it needs an index), so postrender applies them.
func bindings(k *types.Kustomization, params []v1alpha1.ParameterBinding, values map[string]any) error {
	for i, b := range params {
		v, ok := values[b.Value]
		if !ok {
			continue
		}
		target := selector(b.Target.Kind, b.Target.Name)
		switch b.Kind {
		case v1alpha1.BindingReplicas:
			n, err := asReplicas(v)
			if err != nil {
				return invalid("value %q for parameters[%d]: %v", b.Value, i, err)
			}
			if err := addPatch(k, target, jsonPatch{Op: "add", Path: "/spec/replicas", Value: n}); err != nil {
				return err
			}
		case v1alpha1.BindingField:
			if !validPointer(b.FieldPath) {
				return templateErr("parameters[%d].fieldPath %q is not a JSON pointer", i, b.FieldPath)
			}
			if err := addPatch(k, target, jsonPatch{Op: "add", Path: b.FieldPath, Value: v}); err != nil {
				return err
			}
		case v1alpha1.BindingImage, v1alpha1.BindingResources, v1alpha1.BindingEnv:
			// applied by postrender
		default:
			return templateErr("parameters[%d] has unknown kind %q", i, b.Kind)
		}
	}
	return nil
}

func asReplicas(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("replicas must be a number, not %T", v)
	}
	i, err := n.Int64()
	if err != nil || i < 0 || i > 1000 {
		return 0, fmt.Errorf("replicas must be an integer between 0 and 1000, not %s", n)
	}
	return i, nil
}

// validPointer accepts an RFC 6901 pointer that names a member ("/a/b"),
// not the whole document.
func validPointer(p string) bool {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" {
			return false
		}
		// "~" must be followed by 0 or 1.
		for j := 0; j < len(seg); j++ {
			if seg[j] == '~' && (j+1 == len(seg) || (seg[j+1] != '0' && seg[j+1] != '1')) {
				return false
			}
		}
	}
	return true
}
