package sign

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
)

func TestSimpleSigningPayload(t *testing.T) {
	d := digest.Digest("sha256:" + "ab12000000000000000000000000000000000000000000000000000000000000")
	got := string(SimpleSigningPayload("registry.example.com/models/tiny", d))
	want := `{"critical":{"identity":{"docker-reference":"registry.example.com/models/tiny"},` +
		`"image":{"docker-manifest-digest":"sha256:ab12000000000000000000000000000000000000000000000000000000000000"},` +
		`"type":"cosign container image signature"},"optional":null}`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("payload (-want +got):\n%s", diff)
	}
}

func TestTags(t *testing.T) {
	d := digest.Digest("sha256:" + "ab12000000000000000000000000000000000000000000000000000000000000")
	for _, tc := range []struct{ got, want string }{
		{SignatureTag(d), "sha256-ab12000000000000000000000000000000000000000000000000000000000000.sig"},
		{AttestationTag(d), "sha256-ab12000000000000000000000000000000000000000000000000000000000000.att"},
	} {
		if tc.got != tc.want {
			t.Errorf("tag %q, want %q", tc.got, tc.want)
		}
	}
}
