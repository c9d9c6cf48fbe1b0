package imageref

import "testing"

func TestValidate(t *testing.T) {
	cases := []struct {
		ref string
		ok  bool
	}{
		{"nginx", true},
		{"nginx:1.27", true},
		{"registry.example.com:5000/team/app:v1", true},
		{"ghcr.io/acme/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", true},
		{"", false},
		{"Nginx:1", false},
		{"nginx:1.27\u202e", false},          // right-to-left override
		{"ngi\u200bnx:1", false},             // zero-width space
		{"nginx:1\nimage: evil", false},      // newline
		{"nginx:1 ", false},                  // trailing space
		{"nginx:1\x00", false},               // NUL
		{"registry/app:bad tag", false},      // space in tag
		{"registry/app@sha256:short", false}, // malformed digest
	}
	for _, tc := range cases {
		err := Validate(tc.ref)
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tc.ref, err, tc.ok)
		}
	}
}
