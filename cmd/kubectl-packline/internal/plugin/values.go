package plugin

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Schema is the part of a template's valuesSchema the plugin reads to type
// --set values and to describe them: the full check is claims.ValidateValues,
// the admission webhook's own.
type Schema struct {
	Type        any                `json:"type,omitempty"`
	Properties  map[string]*Schema `json:"properties,omitempty"`
	Required    []string           `json:"required,omitempty"`
	Default     any                `json:"default,omitempty"`
	Enum        []any              `json:"enum,omitempty"`
	Description string             `json:"description,omitempty"`
}

// ParseSchema decodes raw (nil or empty means no schema).
func ParseSchema(raw []byte) (*Schema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var s Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("spec.valuesSchema: %w", err)
	}
	return &s, nil
}

// Types are the schema's type keyword as a list ("integer", or
// ["string","null"]).
func (s *Schema) Types() []string {
	if s == nil {
		return nil
	}
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// at returns the schema of the value at path, nil when the schema does
// not say.
func (s *Schema) at(path []string) *Schema {
	for _, p := range path {
		if s == nil || s.Properties == nil {
			return nil
		}
		s = s.Properties[p]
	}
	return s
}

// ParseValues builds a Claim's values from -f files (their contents, in
// order, later ones overriding earlier ones key by key) and --set k=v
// pairs (applied last, in order). A --set value gets the type the schema
// gives its field: "2" is an integer for an integer field and a string
// for a string field. Errors name the field as spec.values.<path>.
func ParseValues(schema *Schema, files []NamedBytes, sets []string) (map[string]any, error) {
	out := map[string]any{}
	for _, f := range files {
		var m map[string]any
		if err := yaml.Unmarshal(f.Data, &m); err != nil {
			return nil, fmt.Errorf("%s: not a YAML mapping of values: %w", f.Name, err)
		}
		merge(out, m)
	}
	var errs []string
	for _, kv := range sets {
		if err := setValue(out, schema, kv); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// NamedBytes is a values file's name (for messages) and content.
type NamedBytes struct {
	Name string
	Data []byte
}

// merge copies src into dst, merging mappings present in both.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

func setValue(out map[string]any, schema *Schema, kv string) error {
	k, raw, ok := strings.Cut(kv, "=")
	path := splitKey(k)
	if !ok || len(path) == 0 {
		return fmt.Errorf("--set %s: want KEY=VALUE (nested keys with dots: a.b=c)", kv)
	}
	if err := SetPath(out, schema, path, raw); err != nil {
		return fmt.Errorf("--set %s: %w", kv, err)
	}
	return nil
}

// SetPath sets the value at path in out from its text raw, typed by the
// schema as --set types it. Errors start with the field,
// spec.values.<path>: the catalogue page shows them next to its input.
func SetPath(out map[string]any, schema *Schema, path []string, raw string) error {
	field := "spec.values." + strings.Join(path, ".")
	v, err := typed(schema.at(path), raw)
	if err != nil {
		return fmt.Errorf("%s: %v", field, err)
	}
	m := out
	for i, p := range path[:len(path)-1] {
		next, exists := m[p]
		if !exists {
			nm := map[string]any{}
			m[p] = nm
			m = nm
			continue
		}
		nm, isMap := next.(map[string]any)
		if !isMap {
			return fmt.Errorf("spec.values.%s is a %s, not a mapping", strings.Join(path[:i+1], "."), jsonType(next))
		}
		m = nm
	}
	m[path[len(path)-1]] = v
	return nil
}

// splitKey splits a.b.c at dots; `\.` is a literal dot in a key.
func splitKey(k string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(k); i++ {
		switch {
		case k[i] == '\\' && i+1 < len(k) && k[i+1] == '.':
			cur.WriteByte('.')
			i++
		case k[i] == '.':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(k[i])
		}
	}
	out = append(out, cur.String())
	for _, p := range out {
		if p == "" {
			return nil
		}
	}
	return out
}

// typed converts raw to the schema's type; with several types, the first
// that fits; without one, what the text looks like (true/false, a number,
// else a string), as helm --set does.
func typed(s *Schema, raw string) (any, error) {
	types := s.Types()
	if len(types) == 0 {
		return infer(raw), nil
	}
	var errs []string
	for _, t := range types {
		v, err := as(t, raw)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("%s", strings.Join(errs, ", or "))
}

func as(t, raw string) (any, error) {
	switch t {
	case "string":
		return raw, nil
	case "integer":
		i, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", raw)
		}
		return i, nil
	case "number":
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("%q is not a number", raw)
		}
		return f, nil
	case "boolean":
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return nil, fmt.Errorf("%q is not a boolean (true or false)", raw)
		}
		return b, nil
	case "null":
		if raw != "null" {
			return nil, fmt.Errorf("%q is not null", raw)
		}
		return nil, nil
	case "array", "object":
		var v any
		if err := yaml.Unmarshal([]byte(raw), &v); err != nil {
			return nil, fmt.Errorf("%q is not a YAML or JSON %s: %v", raw, t, err)
		}
		if jsonType(v) != t {
			return nil, fmt.Errorf("%q is a %s, not an %s", raw, jsonType(v), t)
		}
		return v, nil
	}
	return nil, fmt.Errorf("the schema's type %q is not one the plugin knows", t)
}

func infer(raw string) any {
	if b, err := strconv.ParseBool(raw); err == nil && (raw == "true" || raw == "false") {
		return b
	}
	if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(raw, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f
	}
	if raw == "null" {
		return nil
	}
	return raw
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case int, int64, float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// DescribeValues lists a schema's top-level values for the catalogue, as
// name:type, with * for required and =default when there is one.
func DescribeValues(s *Schema) []string {
	if s == nil || len(s.Properties) == 0 {
		return nil
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		p := s.Properties[n]
		t := strings.Join(p.Types(), "|")
		if t == "" {
			t = "any"
		}
		if p != nil && len(p.Enum) > 0 {
			var vs []string
			for _, e := range p.Enum {
				vs = append(vs, fmt.Sprint(e))
			}
			t = "enum(" + strings.Join(vs, "|") + ")"
		}
		d := n + ":" + t
		if req[n] {
			d += "*"
		}
		if p != nil && p.Default != nil {
			b, _ := json.Marshal(p.Default)
			d += "=" + string(b)
		}
		out = append(out, d)
	}
	return out
}
