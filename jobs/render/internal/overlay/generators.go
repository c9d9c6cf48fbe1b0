package overlay

import (
	"encoding/json"
	"path"
	"regexp"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/packline/packline/api/v1alpha1"
)

// configKeyRE is the key syntax of ConfigMap and Secret data.
var configKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// generators writes each listed value to a file in the overlay and points a
// configMapGenerator or secretGenerator at it. Files, not literals, because
// kustomize strips quotes from literal values and a value may hold "=" or
// newlines; a file carries the bytes unchanged.
func generators(o *Overlay, gens []v1alpha1.Generator, values map[string]any) error {
	k := &o.Kustomization
	for i, g := range gens {
		var args types.GeneratorArgs
		args.Name = g.Name
		for _, key := range g.Values {
			if !configKeyRE.MatchString(key) {
				return templateErr("generators[%d] value %q is not a valid ConfigMap/Secret key", i, key)
			}
			v, ok := values[key]
			if !ok {
				continue
			}
			b, err := valueBytes(v)
			if err != nil {
				return invalid("value %q: %v", key, err)
			}
			file := path.Join("generated", string(g.Kind), g.Name, key)
			o.Files[file] = b
			args.FileSources = append(args.FileSources, key+"="+file)
		}
		switch g.Kind {
		case "ConfigMap":
			k.ConfigMapGenerator = append(k.ConfigMapGenerator, types.ConfigMapArgs{GeneratorArgs: args})
		case "Secret":
			k.SecretGenerator = append(k.SecretGenerator, types.SecretArgs{GeneratorArgs: args, Type: "Opaque"})
		default:
			return templateErr("generators[%d] has unknown kind %q", i, g.Kind)
		}
	}
	return nil
}

// valueBytes is a string value as is, anything else as JSON.
func valueBytes(v any) ([]byte, error) {
	if s, ok := v.(string); ok {
		return []byte(s), nil
	}
	return json.Marshal(v)
}
