package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// Reasons a Claim's requester is not entitled to render it.
const (
	ReasonEntitlementUnverified = "EntitlementUnverified"
	ReasonEntitlementDenied     = "EntitlementDenied"
)

// entitle checks, before a new render starts, that the Claim's requester
// may still claim its template, create what it renders, use the Secrets it
// names and, delivered, act as the ServiceAccount it names. The admission webhook checked this at apply time; the template
// may have appeared or changed since. A run already under way (same
// generation and inputs) is not checked again, so a revoked right never
// turns a finished Claim into a failed one.
//
// The requester is trusted only when its seal verifies. Without one, a
// Claim that names a Secret or an Artifact, or whose template restricts who
// may claim it, cannot render (sealCheck).
func (r *ClaimReconciler) entitle(ctx context.Context, c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, d *entitlement.Delivery, work pipeline.Work) error {
	st := c.Status
	if st.ObservedGeneration == c.Generation && st.InputsHash == work.InputsHash && st.Phase != "" {
		return nil
	}
	blocked := func(reason string, retry time.Duration, format string, args ...any) error {
		return &pipeline.Blocked{Reason: reason, Permanent: true, RetryAfter: retry,
			Message:    fmt.Sprintf(format, args...),
			InputsHash: pipeline.InputsHash([]byte(work.InputsHash), []byte(reason))}
	}
	// No watch tells the controller that an admin granted a missing right,
	// so a denied Claim looks again at the retry backoff's cap.
	recheck := r.Pipeline.Config.BackoffCap
	rights, rightsErr := r.Checker.ClaimRights(c, tpl, d)
	restricted := ""
	if tpl.Spec.Access.ClaimVerbRequired() || len(tpl.Spec.Access.Groups) > 0 {
		restricted = fmt.Sprintf("ClaimTemplate %s restricts who may claim it (spec.access)", tpl.Name)
	}
	req, ok, err := r.seals.requester("Claim", c, c.Spec, referenceFields(rights), restricted, work)
	if err != nil || !ok {
		return err
	}
	if err := entitlement.InGroups(req, tpl); err != nil {
		return blocked(ReasonEntitlementDenied, recheck, "%v", err)
	}
	if rightsErr != nil {
		return blocked(ReasonEntitlementDenied, recheck, "%v", rightsErr)
	}
	err = r.Checker.Check(ctx, req, rights)
	var denied *entitlement.Denied
	if errors.As(err, &denied) {
		return blocked(ReasonEntitlementDenied, recheck, "%v (checked again every %s)", err, recheck)
	}
	return err
}
