package admission

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// decode decodes raw into obj. Its errors name the field: the typed decode
// of a value the schema lets through (a duration such as "soon", a
// malformed quantity) reports only what is wrong with the value, so the
// field is found by decoding the object again, one field at a time.
func decode(d admission.Decoder, raw runtime.RawExtension, obj client.Object) error {
	err := d.DecodeRaw(raw, obj)
	if err == nil {
		return nil
	}
	var generic any
	if json.Unmarshal(raw.Raw, &generic) != nil {
		return err
	}
	if path, ferr := badField(generic, reflect.TypeOf(obj), ""); path != "" {
		return fmt.Errorf("%s: %v", path, ferr)
	}
	return err
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// badField walks the generic JSON v along the Go type t and returns the
// path of the first value that does not decode into its field, with why.
func badField(v any, t reflect.Type, path string) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return "", nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || (t.Kind() != reflect.Struct && t.Kind() != reflect.Map && t.Kind() != reflect.Slice) {
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			return orRoot(path), err
		}
		return "", nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return "", nil // a type mismatch: the schema reports it
		}
		return badStructField(m, t, path)
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return "", nil
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, err := badField(m[k], t.Elem(), path+"."+k); p != "" {
				return p, err
			}
		}
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return "", nil
		}
		for i, e := range l {
			if p, err := badField(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p, err
			}
		}
	}
	return "", nil
}

// badStructField is badField over the JSON fields of struct type t,
// embedded (inline) structs included.
func badStructField(m map[string]any, t reflect.Type, path string) (string, error) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if p, err := badStructField(m, ft, path); p != "" {
					return p, err
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if val, ok := m[name]; ok {
			if p, err := badField(val, f.Type, path+"."+name); p != "" {
				return p, err
			}
		}
	}
	return "", nil
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return strings.TrimPrefix(path, ".")
}
