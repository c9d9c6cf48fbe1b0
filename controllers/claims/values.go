// Package claims holds the pure rules a Claim must pass before it renders:
// values against the template's schema, access, exposure, the choice of
// EnvironmentProfile, and the target repository.
package claims

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CompileSchema compiles a template's valuesSchema. Remote and file $refs
// are refused: the manager must not fetch URLs or read its own files on a
// template author's behalf.
func CompileSchema(raw *apiextensionsv1.JSON) (*jsonschema.Schema, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw.Raw))
	if err != nil {
		return nil, fmt.Errorf("spec.valuesSchema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const loc = "urn:packline:values-schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("spec.valuesSchema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("spec.valuesSchema does not compile: %w", err)
	}
	return s, nil
}

// ValidateValues checks values against the schema. The error lists every
// violation, each naming its field as spec.values.<path>.
func ValidateValues(schema *jsonschema.Schema, values *apiextensionsv1.JSON) error {
	if schema == nil {
		return nil
	}
	raw := []byte("{}")
	if values != nil && len(values.Raw) > 0 {
		raw = values.Raw
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("spec.values is not JSON: %w", err)
	}
	err = schema.Validate(inst)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err
	}
	seen := map[string]bool{}
	var msgs []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		m := fmt.Sprintf("%s: %s", fieldPath(u.InstanceLocation), u.Error.String())
		if !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		msgs = append(msgs, "spec.values: "+ve.Error())
	}
	sort.Strings(msgs)
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// fieldPath turns a JSON pointer into kubectl's dotted field notation.
func fieldPath(ptr string) string {
	out := "spec.values"
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if isIndex(tok) {
			out += "[" + tok + "]"
		} else {
			out += "." + tok
		}
	}
	return out
}

func isIndex(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
