// Package redact removes credentials from text before it leaves a process:
// the worker's termination message and logs, and (for the controller) status
// messages and events.
//
// It works in two layers, both applied by String:
//
//   - Shapes that carry credentials whatever their value: the userinfo,
//     query and fragment of every URL in the text (pre-signed URLs sign in
//     the query; Go's url.Error keeps it), Authorization-style headers,
//     Bearer and Basic credentials, key=value pairs and JSON fields named
//     like secrets, well-known token formats (Hugging Face, GitHub, GitLab)
//     and PEM private keys.
//   - Values the process knows are secret (Add): the worker registers what
//     it reads from its mounted Secrets and HF_TOKEN, so a credential is
//     removed even where it appears in no recognisable shape.
//
// Redaction is deliberately coarse: a redacted message loses a URL's query
// string even when it held nothing secret. A message is for a human to see
// what failed and where, never to replay a request.
package redact

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Mask replaces every redacted value.
const Mask = "[redacted]"

// MinSecretLen is the shortest value Add registers: shorter ones would
// blank ordinary words, and are not credentials anyone should rely on.
const MinSecretLen = 6

var (
	mu     sync.RWMutex
	values []string // longest first
)

// Add registers secret values for String to remove wherever they appear,
// also in their URL-escaped and base64 forms. Values shorter than
// MinSecretLen (after trimming whitespace) are ignored.
func Add(secrets ...string) {
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, v := range values {
		seen[v] = true
	}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < MinSecretLen {
			continue
		}
		for _, v := range []string{s, url.QueryEscape(s), url.PathEscape(s),
			base64.StdEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s))} {
			if !seen[v] {
				seen[v] = true
				values = append(values, v)
			}
		}
	}
	sort.SliceStable(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
}

// Reset forgets the values registered with Add (for tests).
func Reset() {
	mu.Lock()
	values = nil
	mu.Unlock()
}

// Error returns err's message, redacted; "" for nil.
func Error(err error) string {
	if err == nil {
		return ""
	}
	return String(err.Error())
}

var (
	// A URL with a scheme, up to whitespace, a quote or an angle bracket.
	urlRE = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.\-]{0,15}://[^\s"'<>` + "`" + `]+`)

	// Header-like "Authorization: <anything to the end of the line>".
	headerRE = regexp.MustCompile(`(?i)\b(proxy-authorization|authorization|x-api-key|private-token|x-auth-token|cookie|set-cookie)(["']?\s*[:=]\s*)[^\r\n]*`)
	// "Bearer <token>" and "Basic <base64>" anywhere.
	schemeRE = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9\-._~+/]{8,}=*`)
	// key=value with a secret-sounding key, as in a query string or a form.
	kvRE = regexp.MustCompile(`(?i)\b(password|passwd|pwd|token|access_token|refresh_token|id_token|api_key|apikey|secret|client_secret|signature|sig|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential)=([^&\s"'<>]+)`)
	// "password": "…" in JSON (docker config.json and friends).
	jsonRE = regexp.MustCompile(`(?i)("(?:password|auth|identitytoken|registrytoken|token|secret|access_token|refresh_token)"\s*:\s*)"(?:[^"\\]|\\.)*"`)
	// Token formats that are credentials by their shape alone.
	tokenRE = regexp.MustCompile(`\b(?:hf_[A-Za-z0-9]{8,}|api_org_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{16,})`)
	// PEM private keys, even cut short.
	pemRE = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)
)

// String returns s with credentials removed (see the package comment).
func String(s string) string {
	if s == "" {
		return s
	}
	mu.RLock()
	for _, v := range values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Mask)
		}
	}
	mu.RUnlock()
	s = pemRE.ReplaceAllString(s, Mask)
	s = urlRE.ReplaceAllStringFunc(s, URL)
	s = headerRE.ReplaceAllString(s, "${1}${2}"+Mask)
	s = schemeRE.ReplaceAllString(s, "${1}${2}"+Mask)
	s = jsonRE.ReplaceAllString(s, `${1}"`+Mask+`"`)
	s = kvRE.ReplaceAllString(s, "${1}="+Mask)
	s = tokenRE.ReplaceAllString(s, Mask)
	return s
}

// URL redacts one URL for a message: its userinfo, query and fragment are
// replaced by the mask, scheme, host and path are kept. It works on the
// raw text, so a URL that net/url refuses (a malformed pre-signed URL, a
// password with a slash) is redacted too, up to what its text makes plain.
func URL(raw string) string {
	p, ok := split(raw)
	if !ok {
		return raw
	}
	if p.user {
		p.rest = Mask + "@" + p.rest
	}
	if p.tail != "" {
		p.rest += p.tail[:1] + Mask
	}
	return p.scheme + p.rest
}

// Public is a source URL as it may be recorded where anyone reads it (an
// artifact's source annotation, a provenance): userinfo, query and
// fragment are dropped, not masked, so the record names the place and
// nothing else. A scp-like Git address ("git@host:org/repo") loses its
// user too.
func Public(raw string) string {
	p, ok := split(raw)
	if !ok {
		p = scpLike(raw)
	}
	return p.scheme + p.rest
}

// parts are a URL's text cut where a credential may start.
type parts struct {
	scheme string // "https://", with the separator
	rest   string // host and path, without userinfo
	user   bool   // rest had a userinfo
	tail   string // the query and fragment, from the first '?' or '#'
}

func split(raw string) (parts, bool) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return parts{}, false
	}
	p := parts{scheme: raw[:i+3], rest: raw[i+3:]}
	// Query and fragment: from the first '?' or '#'.
	if j := strings.IndexAny(p.rest, "?#"); j >= 0 {
		p.rest, p.tail = p.rest[:j], p.rest[j:]
	}
	// Userinfo ends at the last '@' of the authority (before the path).
	auth := p.rest
	if j := strings.IndexByte(p.rest, '/'); j >= 0 {
		auth = p.rest[:j]
	}
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		p.rest, p.user = p.rest[at+1:], true
	}
	return p, true
}

// scpLike cuts "user@host:path" (no scheme) like split does a URL.
func scpLike(raw string) parts {
	p := parts{rest: raw}
	if j := strings.IndexAny(p.rest, "?#"); j >= 0 {
		p.rest, p.tail = p.rest[:j], p.rest[j:]
	}
	if at := strings.IndexByte(p.rest, '@'); at >= 0 && !strings.Contains(p.rest[:at], "/") {
		p.rest, p.user = p.rest[at+1:], true
	}
	return p
}
