package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/controllers/entitlement"
	"github.com/packline/packline/controllers/pipeline"
)

// untrustedRetry is how soon a resource looks again while the manager
// cannot trust seals (its webhook configurations are being set up, at
// first start, or fixed): the manager re-checks them every few seconds.
const untrustedRetry = 5 * time.Second

// sealCheck finds who asked for a resource, as its seal proves it.
type sealCheck struct {
	// Sealer verifies seals; nil when the manager has no webhook key.
	Sealer *entitlement.Sealer
	// TrustUnsealed lets resources without a verified seal name Secrets,
	// PVCs and Artifacts unchecked (--insecure-unverified-references).
	TrustUnsealed bool
}

// referenceFields are the fields of rights that name one object (a Secret,
// a PVC, a bound Artifact): only a seal can say that who asked may use
// them. (The claim verb on a template is the template's restriction,
// which the Claim's check reports as such.)
func referenceFields(rights []entitlement.Right) []string {
	var fields []string
	for _, r := range rights {
		if r.Attr.Name != "" && r.Attr.Resource != "claimtemplates" && !slices.Contains(fields, r.Field) {
			fields = append(fields, r.Field)
		}
	}
	return fields
}

// requester returns the verified requester of obj, or ok=false when there
// is none and nothing needs one. A resource whose fields name objects,
// or that restricted says only some may have (why), and has no verified
// seal, is Blocked with ReasonEntitlementUnverified: without the webhook,
// or with a seal that was forged, copied or is older than the webhook, no
// one has checked that who asked may use what it names (this covers every
// resource from before the webhook was installed).
func (c sealCheck) requester(kind string, obj client.Object, spec any, fields []string, restricted string, work pipeline.Work) (entitlement.Requester, bool, error) {
	blocked := func(permanent bool, retry time.Duration, format string, args ...any) error {
		return &pipeline.Blocked{Reason: ReasonEntitlementUnverified, Permanent: permanent, RetryAfter: retry,
			Message:    fmt.Sprintf(format, args...),
			InputsHash: pipeline.InputsHash([]byte(work.InputsHash), []byte(ReasonEntitlementUnverified))}
	}
	why := restricted
	if len(fields) > 0 && (restricted != "" || !c.TrustUnsealed) {
		names := strings.Join(fields, ", ") + " name"
		if len(fields) == 1 {
			names = fields[0] + " names"
		}
		if why != "" {
			why += ", and "
		}
		why += names + " objects that only a user entitled to them may use"
	} else if restricted == "" {
		why = ""
	}
	if c.Sealer == nil {
		if why == "" {
			return entitlement.Requester{}, false, nil
		}
		return entitlement.Requester{}, false, blocked(true, 0, "%s, but the manager runs without its admission webhook (--enable-webhooks=false), so who asked for this %s cannot be verified: enable the webhook, then change the %s's spec or delete and re-create it", why, kind, kind)
	}
	req, err := c.Sealer.Verify(kind, obj, spec)
	switch {
	case err == nil:
		return req, true, nil
	case errors.Is(err, entitlement.ErrNoKey):
		return entitlement.Requester{}, false, err
	case why == "":
		// Nothing named: the requester would only widen what is checked.
		return entitlement.Requester{}, false, nil
	case errors.Is(err, entitlement.ErrUntrusted):
		return entitlement.Requester{}, false, blocked(false, untrustedRetry, "%s, and %v; the %s waits (checked again every %s)", why, err, kind, untrustedRetry)
	}
	return entitlement.Requester{}, false, blocked(true, 0, "%s, and %v: change the %s's spec, or delete and re-create it, so that the admission webhook records who asks", why, err, kind)
}
