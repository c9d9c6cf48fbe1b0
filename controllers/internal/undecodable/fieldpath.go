package undecodable

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// badField finds the field that makes decode fail: the deepest one whose
// removal alone lets the object decode, as a path such as
// "spec.delivery.flux.interval". With several bad fields it names the
// object part that holds them all.
func badField(obj map[string]any, decode func(map[string]any) error) string {
	path := []any{}
	for {
		next, ok := culprit(obj, path, decode)
		if !ok {
			break
		}
		path = append(path, next)
	}
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	if b.Len() == 0 {
		return "(object)"
	}
	return b.String()
}

// culprit returns the key or index under path whose removal makes obj decode.
func culprit(obj map[string]any, path []any, decode func(map[string]any) error) (any, bool) {
	at := lookup(obj, path)
	switch v := at.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cp := runtime.DeepCopyJSON(obj)
			delete(lookup(cp, path).(map[string]any), k)
			if decode(cp) == nil {
				return k, true
			}
		}
	case []any:
		for i := range v {
			cp := runtime.DeepCopyJSON(obj)
			parent := lookup(cp, path[:len(path)-1])
			l := lookup(cp, path).([]any)
			trimmed := append(append([]any{}, l[:i]...), l[i+1:]...)
			setAt(parent, path[len(path)-1], trimmed)
			if decode(cp) == nil {
				return i, true
			}
		}
	}
	return nil, false
}

func lookup(v any, path []any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			v = v.(map[string]any)[p]
		case int:
			v = v.([]any)[p]
		}
	}
	return v
}

func setAt(parent any, key any, v any) {
	switch k := key.(type) {
	case string:
		parent.(map[string]any)[k] = v
	case int:
		parent.([]any)[k] = v
	}
}
