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
	// LabelOwnerNamespace is set only on a child object in another
	// namespace than its owner's (a private template's render runs in the
	// template namespace): an owner reference cannot cross namespaces, so
	// watches map the object back to its owner through this label.
	LabelOwnerNamespace = "packline.dev/owner-namespace"

	managedBy = "packline"

	// QueueLabel hands a Job to Kueue.
	QueueLabel = "kueue.x-k8s.io/queue-name"
)

// WorkspaceName is the deterministic name of an object's workspace PVC.
func WorkspaceName(owner string) string { return owner + "-workspace" }

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
