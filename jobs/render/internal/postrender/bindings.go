package postrender

import (
	"encoding/json"
	"errors"
	"fmt"

	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/resource"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/packline/packline/api/imageref"
	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// Bindings checks that every bound target exists and applies the Image,
// Resources and Env bindings whose value the claim sets.
func Bindings(m resmap.ResMap, params []v1alpha1.ParameterBinding, values map[string]any) error {
	for i, b := range params {
		target := find(m, b.Target)
		if target == nil {
			return failure.Permanent(workerv1.ReasonTemplateRejected,
				fmt.Errorf("parameters[%d] targets %s/%s, which the template does not render", i, b.Target.Kind, b.Target.Name))
		}
		v, ok := values[b.Value]
		if !ok {
			continue
		}
		var err error
		switch b.Kind {
		case v1alpha1.BindingImage:
			err = bindImage(target, b, v)
		case v1alpha1.BindingResources:
			err = bindResources(target, b, v)
		case v1alpha1.BindingEnv:
			err = bindEnv(target, b, v)
		default:
			continue // Replicas and Field are overlay patches.
		}
		if err != nil {
			return fmt.Errorf("parameters[%d] (%s %s/%s): %w", i, b.Kind, b.Target.Kind, b.Target.Name, err)
		}
	}
	return nil
}

func find(m resmap.ResMap, s v1alpha1.ObjectSelector) *resource.Resource {
	for _, r := range m.Resources() {
		if r.GetKind() == s.Kind && r.GetName() == s.Name {
			return r
		}
	}
	return nil
}

// container finds the named container, or the first one when name is empty.
func container(r *resource.Resource, name string) (*kyaml.RNode, error) {
	spec, err := podSpec(r)
	if err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, failure.Permanent(workerv1.ReasonTemplateRejected, fmt.Errorf("%s has no pod template", r.GetKind()))
	}
	list, err := spec.Pipe(kyaml.Lookup("containers"))
	if err != nil || list == nil {
		return nil, failure.Permanent(workerv1.ReasonTemplateRejected, errors.New("pod template has no containers"))
	}
	items, err := list.Elements()
	if err != nil {
		return nil, err
	}
	for _, c := range items {
		if name == "" || kyaml.GetValue(c.Field("name").Value) == name {
			return c, nil
		}
	}
	return nil, failure.Permanent(workerv1.ReasonTemplateRejected, fmt.Errorf("no container %q", name))
}

func bindImage(r *resource.Resource, b v1alpha1.ParameterBinding, v any) error {
	s, ok := v.(string)
	if !ok || s == "" {
		return badValue(b, "an image must be a non-empty string")
	}
	if err := imageref.Validate(s); err != nil {
		return badValue(b, err.Error())
	}
	c, err := container(r, b.Container)
	if err != nil {
		return err
	}
	return setField(c, "image", s)
}

func bindResources(r *resource.Resource, b v1alpha1.ParameterBinding, v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return badValue(b, "resources must be an object with requests and/or limits")
	}
	for k := range obj {
		if k != "requests" && k != "limits" {
			return badValue(b, fmt.Sprintf("resources may hold only requests and limits, not %q", k))
		}
	}
	c, err := container(r, b.Container)
	if err != nil {
		return err
	}
	return setField(c, "resources", obj)
}

// bindEnv sets one variable, replacing a template default of the same name
// (including a valueFrom) rather than adding a duplicate.
func bindEnv(r *resource.Resource, b v1alpha1.ParameterBinding, v any) error {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case json.Number:
		s = x.String()
	case bool:
		s = fmt.Sprint(x)
	default:
		return badValue(b, "an env value must be a string, number or boolean")
	}
	c, err := container(r, b.Container)
	if err != nil {
		return err
	}
	env, err := c.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "env"))
	if err != nil {
		return err
	}
	entry, err := toNode(map[string]string{"name": b.EnvName, "value": s})
	if err != nil {
		return err
	}
	items, err := env.Elements()
	if err != nil {
		return err
	}
	for i, e := range items {
		if kyaml.GetValue(e.Field("name").Value) == b.EnvName {
			env.YNode().Content[i] = entry.YNode()
			return nil
		}
	}
	return env.PipeE(kyaml.Append(entry.YNode()))
}

func badValue(b v1alpha1.ParameterBinding, msg string) error {
	return failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("value %q: %s", b.Value, msg))
}
