package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRevisionDigest(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	sum := "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	for _, tc := range []struct {
		rev  string
		want map[string]string
	}{
		{commit, map[string]string{"gitCommit": commit}},
		{"sha256:" + sum, map[string]string{"sha256": sum}},
		{"listing:sha256:" + sum, map[string]string{"packlineListingSha256": sum}},
		{"main", nil},
		{"", nil},
	} {
		if diff := cmp.Diff(tc.want, revisionDigest(tc.rev)); diff != "" {
			t.Errorf("revisionDigest(%q) (-want +got):\n%s", tc.rev, diff)
		}
	}
}

func TestCleanURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pass@example.com/m.tar.gz?X-Amz-Signature=abc#frag": "https://example.com/m.tar.gz",
		"https://example.com/repo.git":                                    "https://example.com/repo.git",
		"ssh://git@example.com/repo.git":                                  "ssh://example.com/repo.git",
		"::not a url":                                                     "",
	} {
		if got := cleanURL(in); got != want {
			t.Errorf("cleanURL(%q) = %q, want %q", in, got, want)
		}
	}
}
