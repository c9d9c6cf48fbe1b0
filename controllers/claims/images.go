package claims

import (
	"fmt"

	"github.com/packline/packline/api/imageref"
	"github.com/packline/packline/api/v1alpha1"
)

// ImageValues checks every value that an Image binding puts into a
// container's image: it must parse as an image reference. A schema rarely
// says so (a plain "string"), and a value with a control or bidirectional
// character would render into a manifest that shows one image and pulls
// another, or fails only at the kubelet, long after the Claim was Ready.
func ImageValues(c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate) error {
	return eachBound(c, tpl, v1alpha1.BindingImage, func(_ int, b v1alpha1.ParameterBinding, v any) string {
		ref, ok := v.(string)
		if !ok {
			return "" // a type the schema judges
		}
		if err := imageref.Validate(ref); err != nil {
			return fmt.Sprintf("spec.values.%s: %v", b.Value, err)
		}
		return ""
	})
}
