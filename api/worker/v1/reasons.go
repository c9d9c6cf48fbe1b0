package workerv1

// Reasons a worker writes in Error.Reason. Each is in Reasons with its
// class and hint; TestReasonsTable keeps the two in step.
const (
	ReasonInvalidSpec    = "InvalidSpec"
	ReasonSourceNotFound = "SourceNotFound"
	ReasonSourceAuth     = "SourceAuthDenied"
	ReasonSourceFailed   = "SourceFailed"
	ReasonChecksum       = "ChecksumMismatch"
	ReasonUnsafeArchive  = "UnsafeArchive"
	ReasonPackFailed     = "PackFailed"
	ReasonRenderFailed   = "RenderFailed"
	ReasonRegistryAuth   = "RegistryAuthDenied"
	ReasonRegistryFailed = "RegistryUnavailable"
	ReasonPushFailed     = "PushFailed"
	// ReasonDeadlineExceeded: the run ran out of time, either the worker's
	// own context or the Job's activeDeadlineSeconds (the controller
	// reports that one from the Job's condition).
	ReasonDeadlineExceeded = "DeadlineExceeded"
	// ReasonWorkerFailed: an error the worker could not classify.
	ReasonWorkerFailed = "WorkerFailed"

	// ReasonTemplateRejected: a Claim's template breaks the render sandbox
	// (a remote base, a path outside the repository, a symlink, a plugin or
	// a Helm chart).
	ReasonTemplateRejected = "TemplateRejected"
	// ReasonRenderTooLarge: a Claim's render would exceed the object, size
	// or time bound (nested bases multiply objects).
	ReasonRenderTooLarge = "RenderTooLarge"
	// ReasonUndeclaredKind: a Claim's render holds a kind its ClaimTemplate
	// does not declare in spec.kinds. Admission checked the requester's
	// right to create the declared kinds only, so nothing else may be pushed.
	ReasonUndeclaredKind = "UndeclaredKind"
	// ReasonTemplateAuth: a Claim's template repository refused the
	// credentials of the ClaimTemplate's spec.source.secretRef, or needs
	// some and the template has none.
	ReasonTemplateAuth = "TemplateAuthDenied"

	// Signing failures. A signature push that fails is retried, and the
	// retry only signs: the artifact is already pushed.
	ReasonSigningKeyMissing     = "SigningKeyMissing"
	ReasonSigningKeyPassword    = "SigningKeyWrongPassword"
	ReasonSigningKeyUnsupported = "SigningKeyUnsupported"
	ReasonSignaturePush         = "SignaturePushFailed"

	// Reasons of a periodic verification (spec.verifyInterval).
	// ReasonArtifactMissing: the pushed digest is no longer in the registry.
	ReasonArtifactMissing = "ArtifactMissing"
	// ReasonTagMoved: the tag resolves to another digest, or to none.
	ReasonTagMoved = "TagMoved"
	// ReasonResultUnavailable: a dispatched run completed, but its tag
	// names nothing in the registry.
	ReasonResultUnavailable = "ResultUnavailable"
)

// Class says whether retrying a failure can help.
type Class string

const (
	// Permanent: retrying cannot help (bad input, denied credentials,
	// missing source); the resource stalls until something is fixed.
	Permanent Class = "Permanent"
	// Retryable: a later attempt may succeed (5xx, timeouts, refused
	// connections).
	Retryable Class = "Retryable"
	// ByCause: the worker decides per error, e.g. an HTTP 5xx is
	// retryable and a 4xx permanent. Error.Permanent carries the decision.
	ByCause Class = "ByCause"
)

// Info is what the contract says about one reason.
type Info struct {
	Class Class
	// Hint is the generic next step. The controller gives a more precise
	// one (naming the field or Secret) where it knows the spec.
	Hint string
}

// Reasons is every reason a worker writes, with its class and hint.
var Reasons = map[string]Info{
	ReasonInvalidSpec:           {Permanent, "the spec the worker received is invalid: fix the field the message names"},
	ReasonSourceNotFound:        {ByCause, "check the source's URL, repository, revision or path"},
	ReasonSourceAuth:            {Permanent, "the source refused the credentials, or needs some: fix the Secret named in spec.source"},
	ReasonSourceFailed:          {ByCause, "the source failed: a server error is retried, a client error needs the source fixed"},
	ReasonChecksum:              {ByCause, "the downloaded content does not match the expected sha256"},
	ReasonUnsafeArchive:         {Permanent, "the archive escapes its folder or exceeds the workspace: use another archive"},
	ReasonPackFailed:            {Permanent, "the files could not be packed: check the Kitfile and the source's layout"},
	ReasonRenderFailed:          {Permanent, "the template did not render with these values: fix the values or the template"},
	ReasonRegistryAuth:          {Permanent, "the registry refused the credentials, or needs some: fix the push Secret"},
	ReasonRegistryFailed:        {Retryable, "the registry is unreachable or failing; the run is retried"},
	ReasonPushFailed:            {ByCause, "the registry rejected the push"},
	ReasonDeadlineExceeded:      {Retryable, "the run took longer than spec.timeout; raise it if the source is large"},
	ReasonWorkerFailed:          {Retryable, "the worker failed unexpectedly; the run is retried"},
	ReasonTemplateRejected:      {Permanent, "the template breaks the render sandbox: a platform admin must change it"},
	ReasonRenderTooLarge:        {Permanent, "the render exceeds the object, size or time bound: change the template or the limit"},
	ReasonUndeclaredKind:        {Permanent, "the render holds a kind the ClaimTemplate does not declare in spec.kinds"},
	ReasonTemplateAuth:          {Permanent, "a platform admin must fix the ClaimTemplate's spec.source.secretRef"},
	ReasonSigningKeyMissing:     {Permanent, "create the signing key Secret with cosign.key"},
	ReasonSigningKeyPassword:    {Permanent, "put the key's password in cosign.password of the signing key Secret"},
	ReasonSigningKeyUnsupported: {Permanent, "use an ECDSA P-256 key: cosign's encrypted PEM or plain PKCS#8 PEM"},
	ReasonSignaturePush:         {ByCause, "the artifact itself is pushed (status.digest); the next attempt only attaches its signature and provenance"},
	ReasonArtifactMissing:       {Permanent, "the pushed digest is gone from the registry; run again to push it"},
	ReasonTagMoved:              {Permanent, "the tag no longer points at the pushed digest; run again to push it"},
	ReasonResultUnavailable:     {Permanent, "the run completed but its tag names nothing in the registry"},
}
