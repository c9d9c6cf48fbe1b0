package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/redact"
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
	return reportReady(ctx, c, obj, base, v, cond)
}

// reportReady sets cond and patches status when anything in it changed
// since base (a caller may have changed more of the status).
func reportReady(ctx context.Context, c client.Client, obj, base client.Object, v validity, cond metav1.Condition) error {
	cond.Message = redact.String(cond.Message)
	apimeta.SetStatusCondition(v.conditions, cond)
	*v.observed = obj.GetGeneration()
	if equality.Semantic.DeepEqual(base, obj) {
		return nil
	}
	return c.Status().Patch(ctx, obj, client.MergeFrom(base))
}
