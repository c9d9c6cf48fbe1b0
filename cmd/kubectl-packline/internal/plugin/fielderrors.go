package plugin

import (
	"regexp"
	"strings"
)

// FieldError is one problem with a Claim, attached to the field it names
// (spec.values.replicas, metadata.name, spec.exposure.type), or to no
// field ("") when the message names none. The catalogue page shows it
// next to that field's input.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// fieldPrefix is a field path at the start of a message: spec.values.a.b,
// spec.values[0], metadata.name.
var fieldPrefix = regexp.MustCompile(`^((?:spec|metadata)(?:\.[A-Za-z0-9_-]+|\[[0-9]+\])*): `)

// missing is the JSON schema's message for required values, reported at
// their parent: "missing property 'a'" or "missing properties 'a', 'b'".
var missing = regexp.MustCompile(`^missing propert(?:y|ies) (.*)$`)

// FieldErrors splits the messages the plugin's checks produce (claims.Violations,
// the access check, SetPath) into one FieldError per field. The values
// check joins its messages with "; ", and reports a missing required value
// at its parent: both are split, so each lands on its own input.
func FieldErrors(msgs []string) []FieldError {
	var out []FieldError
	seen := map[FieldError]bool{}
	add := func(fe FieldError) {
		if !seen[fe] {
			seen[fe] = true
			out = append(out, fe)
		}
	}
	for _, m := range msgs {
		parts := []string{m}
		if strings.HasPrefix(m, "spec.values") {
			parts = strings.Split(m, "; ")
		}
		for _, p := range parts {
			sm := fieldPrefix.FindStringSubmatch(p)
			if sm == nil {
				add(FieldError{Message: p})
				continue
			}
			field, rest := sm[1], p[len(sm[0]):]
			if mm := missing.FindStringSubmatch(rest); mm != nil {
				for _, name := range strings.Split(mm[1], ", ") {
					name = strings.Trim(name, "'")
					add(FieldError{Field: field + "." + name, Message: field + "." + name + ": required"})
				}
				continue
			}
			add(FieldError{Field: field, Message: p})
		}
	}
	return out
}
