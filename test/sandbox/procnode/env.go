package procnode

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type envVar struct{ name, value string }

// env resolves a container's envFrom and env in the kubelet's order: envFrom
// first, env overriding it, each value expanding $(NAME) of earlier ones.
// The node reads Secrets here because it is the kubelet; the values go only
// into the child's environment, never into logs or args.
func (n *Node) env(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]envVar, error) {
	var out []envVar
	for _, from := range c.EnvFrom {
		data, err := n.envFromSource(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			out = setEnv(out, from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v := expand(e.Value, envLookup(out))
		if e.ValueFrom != nil {
			var err error
			if v, err = n.valueFrom(ctx, pod, e.ValueFrom); err != nil {
				return nil, err
			}
		}
		out = setEnv(out, e.Name, v)
	}
	return out, nil
}

func (n *Node) valueFrom(ctx context.Context, pod *corev1.Pod, src *corev1.EnvVarSource) (string, error) {
	switch {
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := n.o.Client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", optional(ref.Optional, err, "secret", ref.Name, ref.Key)
		}
		b, ok := s.Data[ref.Key]
		if !ok {
			return "", optional(ref.Optional, nil, "secret", ref.Name, ref.Key)
		}
		return string(b), nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := n.o.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", optional(ref.Optional, err, "configmap", ref.Name, ref.Key)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			return "", optional(ref.Optional, nil, "configmap", ref.Name, ref.Key)
		}
		return v, nil
	case src.FieldRef != nil:
		return fieldValue(pod, n.podIP(pod.UID), src.FieldRef.FieldPath)
	default:
		return "", configErr("CreateContainerConfigError", "only secretKeyRef, configMapKeyRef and fieldRef are supported by the process node")
	}
}

// optional turns a missing object or key into "" when the reference is
// optional, and otherwise into the kubelet's CreateContainerConfigError.
func optional(opt *bool, err error, kind, name, key string) error {
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if opt != nil && *opt {
		return nil
	}
	if err != nil {
		return configErr("CreateContainerConfigError", "%s %q not found", kind, name)
	}
	return configErr("CreateContainerConfigError", "couldn't find key %s in %s %s", key, kind, name)
}

func (n *Node) envFromSource(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case from.SecretRef != nil:
		s, err := n.o.Client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			return out, optional(from.SecretRef.Optional, err, "secret", from.SecretRef.Name, "")
		}
		for k, v := range s.Data {
			out[k] = string(v)
		}
	case from.ConfigMapRef != nil:
		cm, err := n.o.Client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			return out, optional(from.ConfigMapRef.Optional, err, "configmap", from.ConfigMapRef.Name, "")
		}
		for k, v := range cm.Data {
			out[k] = v
		}
	}
	return out, nil
}

func fieldValue(pod *corev1.Pod, podIP, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return podIP, nil
	case "status.hostIP":
		return "127.0.0.1", nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels['": pod.Labels, "metadata.annotations['": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", configErr("CreateContainerConfigError", "fieldRef %q is not supported by the process node", path)
}

// expand replaces $(NAME) with the variable's value; $$(NAME) escapes it and
// an unknown name is left as written, as Kubernetes does.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func setEnv(env []envVar, name, value string) []envVar {
	for i := range env {
		if env[i].name == name {
			env[i].value = value
			return env
		}
	}
	return append(env, envVar{name, value})
}

func hasEnv(env []envVar, name string) bool {
	_, ok := envLookup(env)(name)
	return ok
}

func envLookup(env []envVar) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, e := range env {
			if e.name == name {
				return e.value, true
			}
		}
		return "", false
	}
}

func flatten(env []envVar) []string {
	out := make([]string, len(env))
	for i, e := range env {
		out[i] = e.name + "=" + e.value
	}
	return out
}
