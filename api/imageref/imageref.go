// Package imageref checks the image references a Claim's values put into
// rendered containers. The manager (admission and reconcile) and the worker
// (render) apply the same check.
package imageref

import (
	"fmt"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
)

// Validate accepts what a container runtime would pull: a reference in the
// distribution grammar, with nothing invisible in it. A control, format
// (bidirectional) or space character would render into a manifest that
// shows one image and pulls another, or fails only at the kubelet.
func Validate(ref string) error {
	for i, r := range ref {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) {
			return fmt.Errorf("image reference has an invisible or control character %U at byte %d", r, i)
		}
	}
	if _, err := name.ParseReference(ref); err != nil {
		return fmt.Errorf("not a valid image reference %q: %v", ref, err)
	}
	return nil
}
