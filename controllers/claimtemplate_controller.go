package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/controllers/pipeline"
)

// ClaimTemplateReconciler tells admins whether a template is usable, so a
// broken schema shows on the template rather than only on every Claim.
type ClaimTemplateReconciler struct {
	Client client.Client
	// Mapper tells whether the cluster serves the kinds a template declares.
	Mapper apimeta.RESTMapper
	// Checker, when set, renders each valid template once per generation
	// (see TemplateChecker); without it, Ready reflects validation only.
	Checker *TemplateChecker
}

// +kubebuilder:rbac:groups=packline.dev,resources=claimtemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

// Reconcile validates one ClaimTemplate.
func (r *ClaimTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tpl := &v1alpha1.ClaimTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, tpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	base := tpl.DeepCopy()
	v := validity{&tpl.Status.Conditions, &tpl.Status.ObservedGeneration}
	err := ValidateTemplate(tpl)
	if err == nil {
		err = r.kindsServed(tpl)
	}
	if err != nil || r.Checker == nil {
		return ctrl.Result{}, reportValidity(ctx, r.Client, tpl, base, v, "template", claims.ReasonInvalidTemplate, err)
	}
	cond, res, err := r.Checker.check(ctx, tpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	return res, reportReady(ctx, r.Client, tpl, base, v, cond)
}

// jsonPointer is the CRD's pattern for fieldPath, which the render applies
// as a JSON6902 path: a template stored before the pattern was tightened is
// caught here, not by its first Claim.
var jsonPointer = regexp.MustCompile(`^(/([^/~]|~[01])+)+$`)

// ValidateTemplate checks what the CRD schema cannot: the values schema
// compiles, and bindings and generators name values the schema declares.
func ValidateTemplate(tpl *v1alpha1.ClaimTemplate) error {
	if _, err := claims.CompileSchema(tpl.Spec.ValuesSchema); err != nil {
		return err
	}
	if props := declaredValues(tpl); props != nil {
		for i, b := range tpl.Spec.Parameters {
			if !props[b.Value] {
				return fmt.Errorf("spec.parameters[%d].value: %q is not a property of spec.valuesSchema", i, b.Value)
			}
		}
		for i, g := range tpl.Spec.Generators {
			for _, v := range g.Values {
				if !props[v] {
					return fmt.Errorf("spec.generators[%d].values: %q is not a property of spec.valuesSchema", i, v)
				}
			}
		}
	}
	for i, b := range tpl.Spec.Parameters {
		if b.FieldPath != "" && !jsonPointer.MatchString(b.FieldPath) {
			return fmt.Errorf("spec.parameters[%d].fieldPath: %q is not a JSON pointer (RFC 6901) such as /spec/template/spec/priorityClassName: each segment is non-empty, and \"~\" is written ~0 and \"/\" ~1", i, b.FieldPath)
		}
	}
	for i, c := range append(append([]string{}, tpl.Spec.Components...), exposureComponents(tpl)...) {
		if strings.Contains(c, "://") || strings.HasPrefix(c, "/") || strings.Contains("/"+c+"/", "/../") {
			return fmt.Errorf("component %d (%q) must be a path inside the template repository", i, c)
		}
	}
	return nil
}

// kindsServed fails for a declared kind the cluster does not serve: no
// claimer could hold the right to create it, so every Claim would be denied.
// A kind whose CRD is installed later makes the template Ready on its next
// reconcile.
func (r *ClaimTemplateReconciler) kindsServed(tpl *v1alpha1.ClaimTemplate) error {
	if r.Mapper == nil {
		return nil
	}
	var unknown []string
	for _, k := range tpl.Spec.Kinds {
		if _, err := r.Mapper.RESTMapping(schema.GroupKind{Group: k.Group, Kind: k.Kind}); err != nil {
			unknown = append(unknown, k.String())
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("spec.kinds: this cluster does not serve %s", strings.Join(unknown, ", "))
	}
	return nil
}

// declaredValues returns the schema's top-level properties, or nil when the
// schema declares none (then any value name is allowed).
func declaredValues(tpl *v1alpha1.ClaimTemplate) map[string]bool {
	if tpl.Spec.ValuesSchema == nil {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(tpl.Spec.ValuesSchema.Raw, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	out := make(map[string]bool, len(s.Properties))
	for k := range s.Properties {
		out[k] = true
	}
	return out
}

func exposureComponents(tpl *v1alpha1.ClaimTemplate) []string {
	var out []string
	for _, e := range tpl.Spec.Exposures {
		if e.Component != "" {
			out = append(out, e.Component)
		}
	}
	return out
}

// checkOwner maps a check Job or pod to its (cluster-scoped) template.
func checkOwner(_ context.Context, o client.Object) []ctrl.Request {
	l := o.GetLabels()
	if l[pipeline.LabelOwnerKind] != "ClaimTemplate" || l[pipeline.LabelOwnerName] == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Name: l[pipeline.LabelOwnerName]}}}
}

// SetupWithManager watches ClaimTemplates.
func (r *ClaimTemplateReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ClaimTemplate{}, builder.WithPredicates(specOrAnnotationChanged)).
		Named("claimtemplate")
	if r.Checker != nil {
		// Check Jobs and pods carry the template's name in their labels.
		b = b.Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(checkOwner)).
			Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(checkOwner))
	}
	return b.Complete(r)
}
