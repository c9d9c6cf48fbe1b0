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
	"strconv"
	"strings"
	"time"

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
	// ErrUnboundSeal: a seal of an earlier version, bound to no object.
	ErrUnboundSeal = errors.New("the " + v1alpha1.AnnotationRequesterSeal + " annotation is of an earlier packline version and is not bound to this object, so it could have been copied from another one")
	// ErrReplayedSeal: a creation seal on an object created at another time.
	ErrReplayedSeal = errors.New("the " + v1alpha1.AnnotationRequesterSeal + " annotation was issued for an object created at another time: it was copied onto this object (for example re-created while the webhook was off)")
	// ErrUntrusted: the manager cannot tell that every write passes its
	// webhook (see Sealer.WithTrust), so no seal is trusted.
	ErrUntrusted = errors.New("seals are not trusted")
)

// A seal is bound to one object, so it cannot be replayed onto another of
// the same name and spec (one re-created while the webhook was off):
//
//   - on a spec change, to the object's UID;
//   - on create, where the API server assigns the UID only after mutating
//     admission, to the time the webhook sealed it, which must match the
//     metadata.creationTimestamp the API server sets right after (no client
//     can set it). A replay must then happen within CreationWindow of the
//     original's creation and still bypass the webhook.
//
// The seal annotation reads "v2.uid.<mac>" or "v2.created.<unix>.<mac>";
// "v2.created.<unix>.gen.<mac>" marks a create with metadata.generateName,
// where the name is not known yet and the MAC covers the prefix instead.
const (
	sealVersion = "v2"
	bindUID     = "uid"
	bindCreated = "created"
	markGenName = "gen"
)

// CreationWindow is how far metadata.creationTimestamp may be from the time
// a creation seal was issued: before it by the clock skew between the
// manager and the API server, after it by the rest of the admission chain.
var CreationWindow = struct{ Before, After time.Duration }{Before: time.Minute, After: 5 * time.Minute}

// Binding is what a seal is bound to: BindUID or BindCreation.
type Binding struct {
	kind    string
	created int64
	genName bool
}

// BindUID binds a seal to the object's UID (a spec change: the object
// exists, so its UID is known).
func BindUID() Binding { return Binding{kind: bindUID} }

// BindCreation binds a seal to the object's creation, now. obj is the
// object being created: a name left to metadata.generateName is bound by
// its prefix.
func BindCreation(obj client.Object, now time.Time) Binding {
	return Binding{kind: bindCreated, created: now.Unix(), genName: obj.GetName() == "" && obj.GetGenerateName() != ""}
}

func (b Binding) prefix() string {
	if b.kind == bindUID {
		return sealVersion + "." + bindUID + "."
	}
	p := fmt.Sprintf("%s.%s.%d.", sealVersion, bindCreated, b.created)
	if b.genName {
		p += markGenName + "."
	}
	return p
}

// part is what the MAC covers of the binding and the object's name.
func (b Binding) part(obj client.Object) []byte {
	name := "name:" + obj.GetName()
	if b.genName {
		name = "generateName:" + obj.GetGenerateName()
	}
	if b.kind == bindUID {
		return []byte(name + "\x00uid:" + string(obj.GetUID()))
	}
	return []byte(fmt.Sprintf("%s\x00created:%d", name, b.created))
}

// parseSeal splits a seal annotation into its binding and MAC.
func parseSeal(v string) (Binding, string, error) {
	parts := strings.Split(v, ".")
	if len(parts) < 2 || parts[0] != sealVersion {
		// A v1 seal was the bare MAC: 32 bytes, unpadded base64url.
		if b, err := base64.RawURLEncoding.DecodeString(v); err == nil && len(b) == sha256.Size {
			return Binding{}, "", ErrUnboundSeal
		}
		return Binding{}, "", ErrBadSeal
	}
	switch {
	case len(parts) == 3 && parts[1] == bindUID:
		return Binding{kind: bindUID}, parts[2], nil
	case (len(parts) == 4 || len(parts) == 5 && parts[3] == markGenName) && parts[1] == bindCreated:
		t, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return Binding{}, "", ErrBadSeal
		}
		return Binding{kind: bindCreated, created: t, genName: len(parts) == 5}, parts[len(parts)-1], nil
	}
	return Binding{}, "", ErrBadSeal
}

// Sealer signs and checks the requester annotations with a key only the
// manager holds. A user can write any annotation while the webhook is off;
// only the webhook can write one that verifies.
type Sealer struct {
	key func() ([]byte, error)
	// trusted, when set, is asked before each Verify (WithTrust).
	trusted func() error
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

// WithTrust is s, except that Verify first asks check whether seals can be
// trusted at all, and fails with ErrUntrusted and its reason when not: the
// controller's sealer, guarded by the manager's check of its own webhook
// configurations (a seal proves the webhook ran only if every write must
// pass it).
func (s *Sealer) WithTrust(check func() error) *Sealer {
	return &Sealer{key: s.key, trusted: check}
}

// Seal returns the annotations that record r as the requester of obj, whose
// spec is spec, bound as b says.
func (s *Sealer) Seal(kind string, obj client.Object, spec any, r Requester, b Binding) (map[string]string, error) {
	enc := r.Encode()
	mac, err := s.mac(kind, obj, spec, enc, b)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		v1alpha1.AnnotationRequester:     enc,
		v1alpha1.AnnotationRequesterSeal: b.prefix() + mac,
	}, nil
}

// Verify returns the sealed requester of obj, or why it cannot be trusted.
// obj is the stored object (or the one being admitted, whose UID and
// creationTimestamp the API server has set before validating admission).
func (s *Sealer) Verify(kind string, obj client.Object, spec any) (Requester, error) {
	if s.trusted != nil {
		if err := s.trusted(); err != nil {
			return Requester{}, fmt.Errorf("%w: %w", ErrUntrusted, err)
		}
	}
	ann := obj.GetAnnotations()
	enc, ok := ann[v1alpha1.AnnotationRequester]
	if !ok {
		return Requester{}, ErrNoRequester
	}
	b, got, err := parseSeal(ann[v1alpha1.AnnotationRequesterSeal])
	if err != nil {
		return Requester{}, err
	}
	want, err := s.mac(kind, obj, spec, enc, b)
	if err != nil {
		return Requester{}, err
	}
	if !hmac.Equal([]byte(want), []byte(got)) || b.genName && !strings.HasPrefix(obj.GetName(), obj.GetGenerateName()) {
		return Requester{}, ErrBadSeal
	}
	if b.kind == bindCreated {
		if err := createdWithin(obj, b.created); err != nil {
			return Requester{}, err
		}
	}
	var r Requester
	dec := json.NewDecoder(bytes.NewReader([]byte(enc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.Username == "" {
		return Requester{}, fmt.Errorf("malformed %s annotation", v1alpha1.AnnotationRequester)
	}
	return r, nil
}

// createdWithin checks a creation seal issued at unix second sealed against
// the object's creationTimestamp.
func createdWithin(obj client.Object, sealed int64) error {
	ct := obj.GetCreationTimestamp()
	at := time.Unix(sealed, 0)
	if ct.IsZero() || ct.Time.Before(at.Add(-CreationWindow.Before)) || ct.Time.After(at.Add(CreationWindow.After)) {
		return fmt.Errorf("%w (sealed at %s, created at %s)", ErrReplayedSeal, at.UTC().Format(time.RFC3339), ct.UTC().Format(time.RFC3339))
	}
	return nil
}

// mac covers the kind, namespace, name, requester, spec and binding, so a
// seal cannot be moved to another object or kept across a spec change.
func (s *Sealer) mac(kind string, obj client.Object, spec any, requester string, b Binding) (string, error) {
	key, err := s.key()
	if err != nil {
		return "", err
	}
	canon, err := Canonical(spec)
	if err != nil {
		return "", err
	}
	h := hmac.New(sha256.New, key)
	for _, part := range [][]byte{[]byte(sealVersion), []byte(kind), []byte(obj.GetNamespace()), b.part(obj), []byte(requester), canon} {
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
