// The result is the worker's half of the contract: one
// JSON object of at most MaxResultBytes written to the pod's termination message.
//
// The controller parses it strictly. Anything it cannot trust (unknown
// fields, trailing data, both or neither of success and error, a malformed
// digest) is an error, which the controller reports as InvalidResult rather
// than guessing or requeueing forever.

package workerv1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/packline/packline/api/redact"
)

// MaxResultBytes is the kubelet's limit on a termination message.
const MaxResultBytes = 4096

// ResultPath is where Kubernetes reads the termination message from.
const ResultPath = "/dev/termination-log"

// Result is what one worker run produced: either the pushed artifact, or Error.
type Result struct {
	Digest         string `json:"digest,omitempty"`
	Reference      string `json:"reference,omitempty"`
	MediaType      string `json:"mediaType,omitempty"`
	ArtifactType   string `json:"artifactType,omitempty"`
	Size           int64  `json:"size,omitempty"`
	SourceRevision string `json:"sourceRevision,omitempty"`
	Tag            string `json:"tag,omitempty"`
	// Check marks a template check: Digest is the rendered archive's, and
	// nothing was pushed, so there is no Reference.
	Check bool `json:"check,omitempty"`
	// Kinds a template check rendered, "Kind" or "Kind.group".
	Kinds []string `json:"kinds,omitempty"`
	// Signature and Attestation are the digests of the cosign signature
	// and provenance manifests attached to Digest, when the run signs.
	Signature   string `json:"signature,omitempty"`
	Attestation string `json:"attestation,omitempty"`
	// ImageDigest and ImageReference name the OCI image view of Digest:
	// an image manifest over the same layers, which containerd mounts as
	// an image volume where it mounts a ModelKit or ModelPack as an empty
	// folder (jobs/push image.go). ImageReference is in the same
	// repository as Reference.
	ImageDigest    string `json:"imageDigest,omitempty"`
	ImageReference string `json:"imageReference,omitempty"`

	Error *Error `json:"error,omitempty"`
}

// Error is a failed run. Permanent errors (bad input, denied credentials,
// missing source) are not retried; the others are.
type Error struct {
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Permanent bool   `json:"permanent"`
	// Pushed is set when the artifact was pushed before the run failed
	// (attaching its signature failed): a retry then only signs it.
	Pushed *Pushed `json:"pushed,omitempty"`
}

// Pushed is an artifact already in the registry.
type Pushed struct {
	Digest         string `json:"digest"`
	Reference      string `json:"reference"`
	SourceRevision string `json:"sourceRevision,omitempty"`
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Failed reports whether the result is a failure.
func (r Result) Failed() bool { return r.Error != nil }

var (
	digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	reasonRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,63}$`)
)

// Validate checks the invariants Parse enforces.
func (r Result) Validate() error {
	if r.Error != nil {
		if r.Digest != "" || r.Reference != "" {
			return errors.New("result has both an error and a digest")
		}
		if !reasonRE.MatchString(r.Error.Reason) {
			return fmt.Errorf("error.reason %q is not a CamelCase word", r.Error.Reason)
		}
		if r.Error.Message == "" {
			return errors.New("error.message is empty")
		}
		if p := r.Error.Pushed; p != nil {
			if err := validateReference(p.Digest, p.Reference); err != nil {
				return fmt.Errorf("error.pushed: %w", err)
			}
		}
		return nil
	}
	if r.Check {
		// A check pushes nothing: a digest, no reference.
		if !digestRE.MatchString(r.Digest) {
			return fmt.Errorf("digest %q is not sha256:<64 hex>", r.Digest)
		}
		if r.Reference != "" {
			return errors.New("a check result has a reference, but a check pushes nothing")
		}
	} else if err := validateReference(r.Digest, r.Reference); err != nil {
		return err
	}
	for name, d := range map[string]string{"signature": r.Signature, "attestation": r.Attestation} {
		if d != "" && !digestRE.MatchString(d) {
			return fmt.Errorf("%s %q is not sha256:<64 hex>", name, d)
		}
	}
	if r.Size < 0 {
		return errors.New("size is negative")
	}
	return r.validateImage()
}

// validateImage checks that an image view, if any, is pinned by its
// digest in the artifact's own repository.
func (r Result) validateImage() error {
	if r.ImageDigest == "" && r.ImageReference == "" {
		return nil
	}
	if err := validateReference(r.ImageDigest, r.ImageReference); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	repo, _, _ := strings.Cut(r.Reference, "@")
	if imageRepo, _, _ := strings.Cut(r.ImageReference, "@"); imageRepo != repo {
		return fmt.Errorf("imageReference %q is not in the repository of reference %q", r.ImageReference, r.Reference)
	}
	return nil
}

func validateReference(digest, reference string) error {
	if !digestRE.MatchString(digest) {
		return fmt.Errorf("digest %q is not sha256:<64 hex>", digest)
	}
	if reference == "" {
		return errors.New("reference is empty")
	}
	if want := "@" + digest; len(reference) <= len(want) || reference[len(reference)-len(want):] != want {
		return fmt.Errorf("reference %q does not end in @%s", reference, digest)
	}
	return nil
}

// ParseResult decodes a termination message strictly.
func ParseResult(b []byte) (Result, error) {
	var r Result
	if len(bytes.TrimSpace(b)) == 0 {
		return r, errors.New("no result was written")
	}
	if len(b) > MaxResultBytes {
		return r, fmt.Errorf("result is %d bytes, more than %d", len(b), MaxResultBytes)
	}
	if !utf8.Valid(b) {
		return r, errors.New("result is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("result is not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Result{}, errors.New("result has trailing data after the JSON object")
	}
	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	return r, nil
}

// MarshalResult encodes r within MaxResultBytes, shortening the error message if needed
// so a long error never loses the whole result. The error message is
// redacted first (see api/redact): every failure the worker reports
// passes through here, so no credential reaches the termination message,
// and from there status, events or logs.
func MarshalResult(r Result) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Error != nil {
		e := *r.Error
		e.Message = redact.String(e.Message)
		r.Error = &e
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(b) <= MaxResultBytes {
		return b, nil
	}
	if r.Error == nil {
		return nil, fmt.Errorf("result is %d bytes, more than %d", len(b), MaxResultBytes)
	}
	return marshalTruncated(r)
}

// ellipsis marks a shortened message; JSON leaves it unescaped.
const ellipsis = "…"

// marshalTruncated keeps the longest prefix of the error message whose
// JSON encoding, with the ellipsis, fits in MaxResultBytes. It counts each
// rune's encoded length (JSON turns '<', '>', '&', U+2028/9 and control
// characters into six-byte \u escapes, and '"' and '\\' into two bytes),
// so a message of escaped characters keeps as much as fits instead of
// collapsing to the ellipsis.
func marshalTruncated(r Result) ([]byte, error) {
	e := *r.Error
	msg := strings.ToValidUTF8(e.Message, string(utf8.RuneError))
	e.Message = ellipsis
	r.Error = &e
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	budget := MaxResultBytes - len(b) // what the message may add to the ellipsis
	if budget < 0 {
		return nil, fmt.Errorf("result is %d bytes without its message, more than %d", len(b), MaxResultBytes)
	}
	end := 0
	for i, c := range msg {
		n := encodedLen(c)
		if n > budget {
			break
		}
		budget -= n
		end = i + utf8.RuneLen(c)
	}
	e.Message = msg[:end] + ellipsis
	b, err = json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxResultBytes {
		return nil, fmt.Errorf("result is %d bytes after shortening its message, more than %d", len(b), MaxResultBytes)
	}
	return b, nil
}

// encodedLen is the length of c inside a JSON string as encoding/json
// writes it.
func encodedLen(c rune) int {
	if c < utf8.RuneSelf && c >= 0x20 && c != '<' && c != '>' && c != '&' && c != '"' && c != '\\' {
		return 1
	}
	b, _ := json.Marshal(string(c))
	return len(b) - 2
}

// WriteResult writes r to path (normally ResultPath).
func WriteResult(path string, r Result) error {
	b, err := MarshalResult(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
