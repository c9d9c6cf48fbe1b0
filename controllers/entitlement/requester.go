// Package entitlement decides whether the user who asked for a Claim or an
// Artifact may have it: the right to claim the template, to create every
// kind the template renders, and to read every Secret and PVC the spec
// names. The admission webhook asks it for the requesting user; the Claim
// controller asks it again, before each render, for the requester that the
// webhook recorded and sealed.
package entitlement

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// Requester is who created a resource or last changed its spec.
type Requester struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// FromUserInfo keeps what a SubjectAccessReview needs. Extra is left out:
// it can hold credential identifiers, and RBAC does not read it.
func FromUserInfo(u authenticationv1.UserInfo) Requester {
	return Requester{Username: u.Username, UID: u.UID, Groups: u.Groups}
}

// Encode is the annotation value.
func (r Requester) Encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// Errors of Verify; the controller reports each as EntitlementUnverified.
var (
	ErrNoRequester = errors.New("no " + v1alpha1.AnnotationRequester + " annotation: the resource was not admitted by packline's admission webhook")
	ErrBadSeal     = errors.New("the " + v1alpha1.AnnotationRequester + " annotation was not written by this installation's admission webhook (the seal does not match: it was set by hand, copied, or the webhook's key has been replaced since)")
	ErrNoKey       = errors.New("the admission webhook's serving key is not available")
)

// Sealer signs and checks the requester annotations with a key only the
// manager holds. A user can write any annotation while the webhook is off;
// only the webhook can write one that verifies.
type Sealer struct {
	key func() ([]byte, error)
}

// NewSealer seals with a fixed key (tests).
func NewSealer(key []byte) *Sealer {
	return &Sealer{key: func() ([]byte, error) { return key, nil }}
}

// NewCertDirSealer derives the key from the webhook's serving certificate
// folder: the CA key when the manager provisions its own certificates
// (stable for the CA's ten years), else the serving key. It is read on each
// use, so a rotated Secret volume is picked up, and every replica that
// mounts the same Secret derives the same key.
func NewCertDirSealer(dir string) *Sealer {
	return &Sealer{key: func() ([]byte, error) {
		for _, name := range []string{"ca.key", "tls.key"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err == nil && len(bytes.TrimSpace(b)) > 0 {
				sum := sha256.Sum256(append([]byte("packline.dev/requester-seal/v1\x00"), b...))
				return sum[:], nil
			}
		}
		return nil, fmt.Errorf("%w: no ca.key or tls.key in %s", ErrNoKey, dir)
	}}
}

// Seal returns the annotations that record r as the requester of obj, whose
// spec is spec.
func (s *Sealer) Seal(kind string, obj client.Object, spec any, r Requester) (map[string]string, error) {
	enc := r.Encode()
	mac, err := s.mac(kind, obj, spec, enc)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		v1alpha1.AnnotationRequester:     enc,
		v1alpha1.AnnotationRequesterSeal: mac,
	}, nil
}

// Verify returns the sealed requester of obj, or why it cannot be trusted.
func (s *Sealer) Verify(kind string, obj client.Object, spec any) (Requester, error) {
	ann := obj.GetAnnotations()
	enc, ok := ann[v1alpha1.AnnotationRequester]
	if !ok {
		return Requester{}, ErrNoRequester
	}
	want, err := s.mac(kind, obj, spec, enc)
	if err != nil {
		return Requester{}, err
	}
	if !hmac.Equal([]byte(want), []byte(ann[v1alpha1.AnnotationRequesterSeal])) {
		return Requester{}, ErrBadSeal
	}
	var r Requester
	dec := json.NewDecoder(bytes.NewReader([]byte(enc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.Username == "" {
		return Requester{}, fmt.Errorf("malformed %s annotation", v1alpha1.AnnotationRequester)
	}
	return r, nil
}

// mac covers the kind, namespace, name, requester and spec, so a seal
// cannot be moved to another object or kept across a spec change.
func (s *Sealer) mac(kind string, obj client.Object, spec any, requester string) (string, error) {
	key, err := s.key()
	if err != nil {
		return "", err
	}
	canon, err := Canonical(spec)
	if err != nil {
		return "", err
	}
	h := hmac.New(sha256.New, key)
	for _, part := range [][]byte{[]byte(kind), []byte(obj.GetNamespace()), []byte(obj.GetName()), []byte(requester), canon} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// Canonical is v as JSON with sorted keys and numbers as written, so the
// webhook (which sees the request) and the controller (which reads the
// stored object) hash the same bytes.
func Canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// NewEphemeralSealer seals with a random key of this process: for push
// seals (SealPush) when the webhook's certificate folder, and so the
// shared key, is not available. A restarted or another replica's manager
// then trusts no earlier seal, and the next run of each resource imports
// from scratch once: correct, only slower.
func NewEphemeralSealer() *Sealer {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	return &Sealer{key: func() ([]byte, error) { return key, err }}
}

// pushSealDomain separates push seals from requester seals made with the
// same key: a requester seal's first part is a kind, never this.
const pushSealDomain = "packline.dev/push-seal/v1"

// SealPush is the MAC that status.pushSeal carries: over the kind and UID
// of the object and the digest and reference the manager read from its
// own worker. A seal copied onto another object, or kept beside an edited
// reference or digest, does not verify.
func (s *Sealer) SealPush(kind, uid, digest, reference string) (string, error) {
	key, err := s.key()
	if err != nil {
		return "", err
	}
	h := hmac.New(sha256.New, key)
	for _, part := range []string{pushSealDomain, kind, uid, digest, reference} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write([]byte(part))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// VerifyPush reports whether seal is SealPush's for these values; without
// the key, nothing verifies.
func (s *Sealer) VerifyPush(kind, uid, digest, reference, seal string) bool {
	if seal == "" || uid == "" || reference == "" {
		return false
	}
	want, err := s.SealPush(kind, uid, digest, reference)
	return err == nil && hmac.Equal([]byte(want), []byte(seal))
}
