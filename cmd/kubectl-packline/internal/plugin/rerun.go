package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// runRerun sets packline.dev/requestedAt to now, as `flux reconcile` sets
// reconcile.fluxcd.io/requestedAt: the controller starts a new attempt of
// a Failed resource (or a new check of a template) without a spec edit.
func runRerun(ctx context.Context, e *env, _ *options, args []string) (int, error) {
	if len(args) != 1 {
		return ExitUsage, usagef("rerun takes KIND/NAME")
	}
	kind, name, err := ParseRef(args[0], "Claim", "Artifact", "ClaimTemplate")
	if err != nil {
		return ExitUsage, err
	}
	if err := e.connect(); err != nil {
		return ExitFailed, err
	}
	var obj client.Object
	key := client.ObjectKey{Namespace: e.ns, Name: name}
	switch kind {
	case "Claim":
		obj = &v1alpha1.Claim{}
	case "Artifact":
		obj = &v1alpha1.Artifact{}
	default:
		obj, key.Namespace = &v1alpha1.ClaimTemplate{}, ""
	}
	obj.SetNamespace(key.Namespace)
	obj.SetName(name)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationRequestedAt: now}}})
	if err := e.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return ExitFailed, fmt.Errorf("annotating %s %s: %w", kind, name, err)
	}
	fmt.Fprintf(e.stdout, "%s/%s: new run requested (%s=%s)\n", kindNameLower(kind), name, v1alpha1.AnnotationRequestedAt, now)
	return ExitOK, nil
}

func kindNameLower(kind string) string { return lower([]string{kind})[0] }
