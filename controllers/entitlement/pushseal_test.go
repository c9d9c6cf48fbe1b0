package entitlement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A push seal verifies only for the same kind, object UID, digest and
// reference, under the same key: a reference written by hand, or a seal
// copied from another object, does not.
func TestPushSeal(t *testing.T) {
	const (
		uid    = "0f7c5a7e-uid"
		digest = "sha256:aaaa"
		ref    = "r.example.com/m@sha256:aaaa"
	)
	s := NewSealer([]byte("k"))
	seal, err := s.SealPush("Artifact", uid, digest, ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                   string
		sealer                 *Sealer
		kind, uid, digest, ref string
		seal                   string
		want                   bool
	}{
		{"as sealed", s, "Artifact", uid, digest, ref, seal, true},
		{"forged reference", s, "Artifact", uid, digest, "evil.example.com/m@sha256:aaaa", seal, false},
		{"forged digest", s, "Artifact", uid, "sha256:bbbb", ref, seal, false},
		{"copied to another object", s, "Artifact", "other-uid", digest, ref, seal, false},
		{"another kind", s, "Claim", uid, digest, ref, seal, false},
		{"no seal", s, "Artifact", uid, digest, ref, "", false},
		{"another key", NewSealer([]byte("other")), "Artifact", uid, digest, ref, seal, false},
		{"another process's ephemeral key", NewEphemeralSealer(), "Artifact", uid, digest, ref, seal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.sealer.VerifyPush(tc.kind, tc.uid, tc.digest, tc.ref, tc.seal)); diff != "" {
				t.Errorf("VerifyPush (-want +got):\n%s", diff)
			}
		})
	}
	// Within one process, the ephemeral key verifies what it sealed.
	e := NewEphemeralSealer()
	a, _ := e.SealPush("Artifact", uid, digest, ref)
	if !e.VerifyPush("Artifact", uid, digest, ref, a) {
		t.Error("an ephemeral sealer does not verify its own seal")
	}
}
