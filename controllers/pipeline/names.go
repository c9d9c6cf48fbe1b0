package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels on every child object. None of them carries the operator version,
// so an upgraded manager still finds the Jobs an older one created.
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	LabelOwnerKind  = "packline.dev/owner-kind"
	LabelOwnerName  = "packline.dev/owner-name"
	LabelOwnerUID   = "packline.dev/owner-uid"
	LabelGeneration = "packline.dev/generation"
	LabelAttempt    = "packline.dev/attempt"
	LabelInputs     = "packline.dev/inputs"
	// LabelJobKind says what a Job (and its pods) does: run, cleanup,
	// verify, resolve or template-check (see JobKind).
	LabelJobKind = "packline.dev/job-kind"
	// LabelOwnerNamespace is set only on a child object in another
	// namespace than its owner's (a private template's render runs in the
	// template namespace): an owner reference cannot cross namespaces, so
	// watches map the object back to its owner through this label.
	LabelOwnerNamespace = "packline.dev/owner-namespace"

	managedBy = "packline"

	// QueueLabel hands a Job to Kueue.
	QueueLabel = "kueue.x-k8s.io/queue-name"
)

// WorkspaceName is the deterministic name of a run's workspace PVC; base
// is RunBase's.
func WorkspaceName(base string) string { return base + "-workspace" }

// RunBase is what the names of an owner's Jobs and workspace start with in
// namespace ns. In the owner's own namespace it is the owner's name. In
// another namespace (an admin run: a private template's or a signing
// profile's Claims render in the template namespace) Claims of one name
// from many tenants meet, so the base carries the owner's namespace, for
// people, and a hash of its UID, so that two tenants' names can never be
// the same: the UID is assigned by the API server, which no tenant can
// choose or grind ("team-a" + "b-c" and "team-a-b" + "c" differ by their
// hash). It stays within 63 characters, so a Job's pod labels stay valid.
func RunBase(o Owner, ns string) string {
	if ns == "" || ns == o.Namespace || o.Namespace == "" {
		return o.Name
	}
	h := "-" + short(hashOf(o.UID), 8)
	base := o.Namespace + "-" + o.Name
	if keep := validation.DNS1123LabelMaxLength - len(h); len(base) > keep {
		base = trimDash(base[:keep])
	}
	return base + h
}

// JobName is the deterministic name of the Job for one (generation, inputs,
// attempt). Because it is deterministic, a stale cache can never create a
// second Job: the create fails with AlreadyExists and the Job is found.
// Names that would pass 63 characters (Job names end up in pod labels) are
// cut and given a hash of the full name, so distinct runs stay distinct.
func JobName(owner string, generation int64, inputs string, attempt int32) string {
	suffix := fmt.Sprintf("-g%d-%s-a%d", generation, short(inputs, 5), attempt)
	name := owner + suffix
	if len(name) <= validation.DNS1123LabelMaxLength {
		return name
	}
	h := short(hashOf(name), 8)
	keep := validation.DNS1123LabelMaxLength - len(suffix) - len(h) - 1
	return trimDash(owner[:keep]) + "-" + h + suffix
}

// InputsHash hashes the effective inputs of a run for the inputs label.
func InputsHash(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{0})
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func short(s string, n int) string {
	if len(s) < n {
		return s
	}
	return s[:n]
}

func trimDash(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '-' || s[len(s)-1] == '.') {
		s = s[:len(s)-1]
	}
	return s
}
