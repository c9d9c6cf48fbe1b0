package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFieldErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []string
		want []FieldError
	}{
		{"a value's error", []string{`spec.values.replicas: "two" is not an integer`},
			[]FieldError{{"spec.values.replicas", `spec.values.replicas: "two" is not an integer`}}},
		{"the values check's joined messages", []string{"spec.values.replicas: maximum: got 9, want 3; spec.values: additional properties 'colour' not allowed"},
			[]FieldError{{"spec.values.replicas", "spec.values.replicas: maximum: got 9, want 3"}, {"spec.values", "spec.values: additional properties 'colour' not allowed"}}},
		{"missing required values land on their own fields", []string{"spec.values.db: missing properties 'user', 'size'"},
			[]FieldError{{"spec.values.db.user", "spec.values.db.user: required"}, {"spec.values.db.size", "spec.values.db.size: required"}}},
		{"missing at the top", []string{"spec.values: missing property 'image'"},
			[]FieldError{{"spec.values.image", "spec.values.image: required"}}},
		{"an index", []string{"spec.values.ports[0]: got string, want integer"},
			[]FieldError{{"spec.values.ports[0]", "spec.values.ports[0]: got string, want integer"}}},
		{"no field, and a message that only mentions one", []string{"the Claim is refused", "needs spec.values: x"},
			[]FieldError{{"", "the Claim is refused"}, {"", "needs spec.values: x"}}},
		{"another field's message is not split", []string{"spec.templateRef: a; b"},
			[]FieldError{{"spec.templateRef", "spec.templateRef: a; b"}}},
		{"duplicates once", []string{"metadata.name: required", "metadata.name: required"},
			[]FieldError{{"metadata.name", "metadata.name: required"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, FieldErrors(tc.msgs)); d != "" {
				t.Errorf("FieldErrors (-want +got):\n%s", d)
			}
		})
	}
}
