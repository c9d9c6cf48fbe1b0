package workerv1

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	d  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	d2 = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, in string
		wantErr  string
	}{
		{"success", `{"digest":"` + d + `","reference":"r.io/a/b@` + d + `","size":3}`, ""},
		{"failure", `{"error":{"reason":"AuthDenied","message":"401 from registry","permanent":true}}`, ""},
		{"empty", ``, "no result"},
		{"whitespace", " \n", "no result"},
		{"not json", `digest: sha256:abc`, "not a JSON object"},
		{"unknown field", `{"digest":"` + d + `","reference":"r@` + d + `","extra":1}`, "unknown field"},
		{"trailing", `{"error":{"reason":"X","message":"m"}} {}`, "trailing"},
		{"bad digest", `{"digest":"sha256:xyz","reference":"r@sha256:xyz"}`, "not sha256"},
		{"ref mismatch", `{"digest":"` + d + `","reference":"r:latest"}`, "does not end"},
		{"both", `{"digest":"` + d + `","reference":"r@` + d + `","error":{"reason":"X","message":"m"}}`, "both"},
		{"neither", `{}`, "not sha256"},
		{"bad reason", `{"error":{"reason":"no spaces allowed","message":"m"}}`, "CamelCase"},
		{"empty message", `{"error":{"reason":"X","message":""}}`, "message is empty"},
		{"too big", `{"error":{"reason":"X","message":"` + strings.Repeat("a", MaxResultBytes) + `"}}`, "more than"},
		{"array", `[1]`, "not a JSON object"},
		{"signed", `{"digest":"` + d + `","reference":"r@` + d + `","signature":"` + d + `","attestation":"` + d + `"}`, ""},
		{"bad signature", `{"digest":"` + d + `","reference":"r@` + d + `","signature":"sha256:xyz"}`, "signature"},
		{"pushed then failed", `{"error":{"reason":"SignaturePushFailed","message":"m","pushed":{"digest":"` + d + `","reference":"r@` + d + `","sourceRevision":"abc"}}}`, ""},
		{"image view", `{"digest":"` + d + `","reference":"r.io/a@` + d + `","imageDigest":"` + d2 + `","imageReference":"r.io/a@` + d2 + `"}`, ""},
		{"image elsewhere", `{"digest":"` + d + `","reference":"r.io/a@` + d + `","imageDigest":"` + d2 + `","imageReference":"r.io/other@` + d2 + `"}`, "not in the repository"},
		{"image reference only", `{"digest":"` + d + `","reference":"r.io/a@` + d + `","imageReference":"r.io/a@` + d2 + `"}`, "image: digest"},
		{"pushed bad reference", `{"error":{"reason":"X","message":"m","pushed":{"digest":"` + d + `","reference":"r:latest"}}}`, "error.pushed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseResult([]byte(tc.in))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Parse error = %v, want containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestMarshalTruncatesLongErrors(t *testing.T) {
	r := Result{Error: &Error{Reason: "SourceFailed", Message: strings.Repeat("é\"", 5000), Permanent: true}}
	b, err := MarshalResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxResultBytes {
		t.Fatalf("marshalled %d bytes", len(b))
	}
	got, err := ParseResult(b)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	if !got.Error.Permanent || !strings.HasSuffix(got.Error.Message, "…") {
		t.Fatalf("lost fields: %+v", got.Error)
	}
}

// TestMarshalTruncatesAgainstEncodedLength: JSON escapes '<', '>', '&' and
// control characters to six bytes each, so truncation must count encoded
// bytes. Whatever the message holds, the result fits in MaxResultBytes and keeps
// the longest prefix that fits: one more rune would not.
func TestMarshalTruncatesAgainstEncodedLength(t *testing.T) {
	for name, msg := range map[string]string{
		"angle brackets": strings.Repeat("<", 10000),
		"mixed escapes":  strings.Repeat("a<b>&\"\\\x01\n\u2028é", 2000),
		"control chars":  strings.Repeat("\x00\x1f", 5000),
		"invalid utf-8":  strings.Repeat("x\xff", 5000),
		"plain":          strings.Repeat("plain text ", 1000),
	} {
		t.Run(name, func(t *testing.T) {
			b, err := MarshalResult(Result{Error: &Error{Reason: "RenderFailed", Message: msg, Permanent: true}})
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxResultBytes {
				t.Fatalf("marshalled %d bytes", len(b))
			}
			got, err := ParseResult(b)
			if err != nil {
				t.Fatalf("round trip: %v", err)
			}
			kept, ok := strings.CutSuffix(got.Error.Message, "…")
			valid := strings.ToValidUTF8(msg, "\uFFFD")
			if !ok || !strings.HasPrefix(valid, kept) || len(kept) >= len(valid) {
				t.Fatalf("message %q is not a shortened prefix", got.Error.Message)
			}
			next, _ := utf8.DecodeRuneInString(valid[len(kept):])
			more, err := json.Marshal(Result{Error: &Error{Reason: "RenderFailed", Message: kept + string(next) + "…", Permanent: true}})
			if err != nil {
				t.Fatal(err)
			}
			if len(more) <= MaxResultBytes {
				t.Errorf("kept %d bytes of the message (%d encoded in all); one more rune still fits (%d)", len(kept), len(b), len(more))
			}
		})
	}
}

// FuzzParse: whatever Parse accepts must re-marshal and re-parse to the same value.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"digest":"` + d + `","reference":"r.io/a/b@` + d + `","size":3,"sourceRevision":"abc"}`))
	f.Add([]byte(`{"error":{"reason":"AuthDenied","message":"401","permanent":true}}`))
	f.Add([]byte(`{"digest":"sha256:00"}`))
	f.Add([]byte(`{} []`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResult(b)
		if err != nil {
			return
		}
		out, err := MarshalResult(r)
		if err != nil {
			t.Fatalf("accepted result does not marshal: %v", err)
		}
		r2, err := ParseResult(out)
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if (r.Error == nil) != (r2.Error == nil) || r.Digest != r2.Digest {
			t.Fatalf("round trip changed the result: %+v vs %+v", r, r2)
		}
	})
}
