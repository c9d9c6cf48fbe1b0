package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// validity is the status an admin-written object (ClaimTemplate,
// EnvironmentProfile) carries: whether it is usable, and why not.
type validity struct {
	conditions *[]metav1.Condition
	observed   *int64
}

// reportValidity sets Ready from err (nil: valid) and patches status once,
// only when it changed. base is obj as read.
func reportValidity(ctx context.Context, c client.Client, obj, base client.Object, v validity, what, invalidReason string, err error) error {
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Valid",
		Message: what + " is valid", ObservedGeneration: obj.GetGeneration()}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, invalidReason, err.Error()
	}
	before := append([]metav1.Condition(nil), *v.conditions...)
	beforeGen := *v.observed
	apimeta.SetStatusCondition(v.conditions, cond)
	*v.observed = obj.GetGeneration()
	if beforeGen == *v.observed && equality.Semantic.DeepEqual(before, *v.conditions) {
		return nil
	}
	return c.Status().Patch(ctx, obj, client.MergeFrom(base))
}
