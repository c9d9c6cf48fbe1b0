package v1alpha1

// Annotations the admission webhook owns on Claims and Artifacts. Users
// cannot set or change them: the mutating webhook overwrites them on every
// create and every spec change, and restores them on any other update.
const (
	// AnnotationRequester records who created the resource or last changed
	// its spec, as JSON: {"username":…,"uid":…,"groups":[…]}. The controller
	// re-checks that user's rights before each render.
	AnnotationRequester = "packline.dev/requester"

	// AnnotationRequesterSeal is an HMAC-SHA256, keyed from the webhook's
	// serving key, over the kind, namespace, name, requester and spec, and
	// bound to the object: to its UID after a spec change, to its
	// creationTimestamp on create (see controllers/entitlement). It is how
	// the controller tells a requester written by the webhook from one a
	// user wrote, or copied, while the webhook was off.
	AnnotationRequesterSeal = "packline.dev/requester-seal"
)

// AnnotationRequestedAt asks for a new attempt of a Failed resource without
// a spec edit, in the style of Flux's reconcile.fluxcd.io/requestedAt: set
// it to any new value (kubectl annotate … packline.dev/requestedAt="$(date
// +%s)" --overwrite), for example once a wrong Secret has been fixed.
const AnnotationRequestedAt = "packline.dev/requestedAt"

// ClaimVerb is the RBAC verb on claimtemplates that grants claiming one.
const ClaimVerb = "claim"

// AnnotationUndecodable is set by the manager's cache, in memory only, on
// the stand-in it keeps for a stored EnvironmentProfile that does not decode
// (for example written before the CRD refused its value): the message
// names the field. The stand-in holds only the profile's metadata, status
// and namespaceSelector, so that the profile is reported invalid and the
// Claims it selects wait, rather than going on without it.
const AnnotationUndecodable = "packline.dev/undecodable"
