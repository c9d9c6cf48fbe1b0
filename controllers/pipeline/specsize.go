package pipeline

import (
	"fmt"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// ReasonSpecTooLarge: the worker's document does not fit in its environment.
const ReasonSpecTooLarge = "SpecTooLarge"

// MaxSpecBytes bounds the worker document (PACKLINE_SPEC). Linux refuses to
// start a process with any environment string over 128 KiB (E2BIG), which
// the pod would report as a crash with no hint; a margin is left for the
// variable's name and for growth of the document's own fields.
const MaxSpecBytes = 96 << 10

// checkSpecSize refuses, with a message naming what to shrink, a run whose
// worker document would not fit.
func checkSpecSize(w Work) error {
	doc, err := workerv1.EncodeSpec(w.Spec)
	if err != nil {
		return fmt.Errorf("encoding worker spec: %w", err)
	}
	if len(doc) <= MaxSpecBytes {
		return nil
	}
	return &Blocked{Reason: ReasonSpecTooLarge, Permanent: true, InputsHash: w.InputsHash,
		Message: fmt.Sprintf("the worker document is %d KiB, over the %d KiB limit (a container's environment strings are limited to 128 KiB): "+
			"shrink spec.values (a Claim) or spec.kitfile (an Artifact), or move large content into the source", len(doc)>>10, MaxSpecBytes>>10)}
}
