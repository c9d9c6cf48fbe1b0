// Progress is the worker's third channel to the manager, beside the spec
// and the result: while it runs, the worker prints progress lines to its
// log (stderr), and the manager reads the last one back through the API
// server's pods/log (controllers/pipeline/progress.go).
//
// Why the log: the worker pod runs without a ServiceAccount token, so it
// cannot write status, an annotation or anything else through the API
// server; the termination message is read only when the container ends.
// The log is what the kubelet already keeps for `kubectl logs`, and the
// manager may read it with one bounded GET (tailLines, limitBytes).
//
// A log is not trusted input: the worker prints names a tenant chose (file
// names, paths) on other lines, and a name may hold a newline. So a
// progress line is one fixed prefix followed by a small JSON object of
// numbers and a step from a closed set, parsed strictly and bounded; the
// manager builds what status shows from those numbers only, and never
// copies other log text anywhere.

package workerv1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/packline/packline/api/v1alpha1"
)

// ProgressPrefix starts every progress line. It is followed by one JSON
// Progress object and a newline.
const ProgressPrefix = "packline-progress: "

// MaxProgressLine bounds a progress line, prefix included; longer lines are
// not progress lines.
const MaxProgressLine = 256

// MaxProgressBytes bounds every byte count a progress line may carry
// (1 PiB): a larger value is rejected, not clamped.
const MaxProgressBytes int64 = 1 << 50

// Step is what a run is doing (status.progress.step).
type Step = v1alpha1.ProgressStep

// Steps. An Artifact's worker downloads (and hashes) then packs and
// pushes; a Claim's worker clones the template, renders and pushes.
// StepDeliver is the manager's own, never a worker's: a pushed Claim that
// Flux has not applied yet.
const (
	StepDownload = v1alpha1.StepDownload
	StepPush     = v1alpha1.StepPush
	StepClone    = v1alpha1.StepClone
	StepRender   = v1alpha1.StepRender
	StepDeliver  = v1alpha1.StepDeliver
)

// workerSteps are the steps a progress line may carry.
var workerSteps = map[Step]bool{StepDownload: true, StepPush: true, StepClone: true, StepRender: true}

// Progress is one progress line's content.
type Progress struct {
	Step Step `json:"step"`
	// Done and Total count bytes; Total is 0 when unknown.
	Done  int64 `json:"done,omitempty"`
	Total int64 `json:"total,omitempty"`
	// Rate is the mean bytes per second since the step started.
	Rate int64 `json:"rate,omitempty"`
}

// Validate reports why p is not a progress line's content.
func (p Progress) Validate() error {
	if !workerSteps[p.Step] {
		return fmt.Errorf("unknown step %q", p.Step)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"done", p.Done}, {"total", p.Total}, {"rate", p.Rate}} {
		if n.v < 0 || n.v > MaxProgressBytes {
			return fmt.Errorf("%s %d out of range [0, %d]", n.name, n.v, MaxProgressBytes)
		}
	}
	return nil
}

// WriteProgress prints p as one progress line. Errors are ignored: progress
// is advisory, and a log that cannot be written must not fail the run.
func WriteProgress(w io.Writer, p Progress) {
	if w == nil || p.Validate() != nil {
		return
	}
	b, _ := json.Marshal(p)
	_, _ = fmt.Fprintf(w, "%s%s\n", ProgressPrefix, b)
}

// ParseProgress reads one line (without its newline). ok is false for any
// line that is not a well-formed progress line: a wrong prefix, too long,
// unknown fields, trailing data, an unknown step or numbers out of range.
func ParseProgress(line string) (Progress, bool) {
	line = strings.TrimSuffix(line, "\r")
	rest, ok := strings.CutPrefix(line, ProgressPrefix)
	if !ok || len(line) > MaxProgressLine {
		return Progress{}, false
	}
	dec := json.NewDecoder(strings.NewReader(rest))
	dec.DisallowUnknownFields()
	var p Progress
	if err := dec.Decode(&p); err != nil || dec.More() {
		return Progress{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return Progress{}, false
	}
	if p.Validate() != nil {
		return Progress{}, false
	}
	return p, true
}

// LastProgress is the last well-formed progress line in a log tail. A tail
// cut by a byte limit (limitBytes keeps the first bytes of the last lines)
// may end mid-line: that fragment does not parse, and an earlier line
// counts.
func LastProgress(tail []byte) (Progress, bool) {
	for len(tail) > 0 {
		i := bytes.LastIndexByte(tail[:len(tail)-1], '\n')
		line := bytes.TrimRight(tail[i+1:], "\n")
		if p, ok := ParseProgress(string(line)); ok {
			return p, true
		}
		if i < 0 {
			break
		}
		tail = tail[:i+1]
	}
	return Progress{}, false
}
