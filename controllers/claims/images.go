package claims

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/jobs/imageref"
)

// ImageValues checks every value that an Image binding puts into a
// container's image: it must parse as an image reference. A schema rarely
// says so (a plain "string"), and a value with a control or bidirectional
// character would render into a manifest that shows one image and pulls
// another, or fails only at the kubelet, long after the Claim was Ready.
func ImageValues(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate) error {
	if c.Spec.Values == nil || len(c.Spec.Values.Raw) == 0 {
		return nil
	}
	var values map[string]any
	if err := json.Unmarshal(c.Spec.Values.Raw, &values); err != nil {
		return nil // ValidateValues reports malformed values.
	}
	var errs []string
	seen := map[string]bool{}
	for _, b := range tpl.Spec.Parameters {
		if b.Kind != v1alpha1.BindingImage || seen[b.Value] {
			continue
		}
		seen[b.Value] = true
		v, ok := values[b.Value].(string)
		if !ok {
			continue // absent, or a type the schema judges
		}
		if err := imageref.Validate(v); err != nil {
			errs = append(errs, fmt.Sprintf("spec.values.%s: %v", b.Value, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
