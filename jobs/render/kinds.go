package render

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/resmap"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// checkKinds fails permanently, naming every undeclared kind, when the
// render holds an object whose group and kind spec.kinds does not list.
func checkKinds(m resmap.ResMap, declared []v1alpha1.RenderedKind) error {
	ok := map[v1alpha1.RenderedKind]bool{}
	for _, k := range declared {
		ok[k] = true
	}
	found := map[string]bool{}
	for _, r := range m.Resources() {
		k := v1alpha1.RenderedKind{Group: r.GetGvk().Group, Kind: r.GetKind()}
		if !ok[k] {
			found[k.String()] = true
		}
	}
	if len(found) == 0 {
		return nil
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	return failure.Permanent(workerv1.ReasonUndeclaredKind, fmt.Errorf(
		"the render holds kinds the ClaimTemplate does not declare in spec.kinds: %s; an admin must declare them (claimers then need the right to create them) or remove them from the template",
		strings.Join(names, ", ")))
}
