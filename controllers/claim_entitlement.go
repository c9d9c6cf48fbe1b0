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
// The requester is trusted only when its seal verifies. Without the
// webhook, a template that restricts who may claim it cannot render.
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
	restricted := tpl.Spec.Access.ClaimVerbRequired() || len(tpl.Spec.Access.Groups) > 0
	if r.Sealer == nil {
		if restricted {
			return blocked(ReasonEntitlementUnverified, 0, "ClaimTemplate %s restricts who may claim it (spec.access), but the manager runs without its admission webhook (--enable-webhooks=false), so who asked for this Claim cannot be verified: enable the webhook and re-apply the Claim", tpl.Name)
		}
		return nil
	}
	req, err := r.Sealer.Verify("Claim", c, c.Spec)
	switch {
	case errors.Is(err, entitlement.ErrNoKey):
		return err
	case err != nil && restricted:
		return blocked(ReasonEntitlementUnverified, 0, "ClaimTemplate %s restricts who may claim it (spec.access), and %v: re-apply the Claim (change its spec or re-create it) so the admission webhook records who asks", tpl.Name, err)
	case err != nil:
		// An open template: the requester only widens what is checked.
		return nil
	}
	if err := entitlement.InGroups(req, tpl); err != nil {
		return blocked(ReasonEntitlementDenied, recheck, "%v", err)
	}
	rights, err := r.Checker.ClaimRights(c, tpl, d)
	if err != nil {
		return blocked(ReasonEntitlementDenied, recheck, "%v", err)
	}
	err = r.Checker.Check(ctx, req, rights)
	var denied *entitlement.Denied
	if errors.As(err, &denied) {
		return blocked(ReasonEntitlementDenied, recheck, "%v (checked again every %s)", err, recheck)
	}
	return err
}
