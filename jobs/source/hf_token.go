package source

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/packline/packline/api/redact"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// hfClient returns a copy of c that sends the token (as a Bearer
// Authorization header) on requests to the endpoint's own origin only:
// same scheme, host and port, and so on every redirect hop that stays
// there and on none that leaves it. Go's client alone would keep a header
// set on the first request across a redirect to the same host name on
// another port, from https to http, or to any subdomain.
func hfClient(c *http.Client, endpoint, token string) (*http.Client, error) {
	if token == "" {
		return c, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("hugging face endpoint %q is not an http(s) URL", redact.Public(endpoint)))
	}
	cc := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cc.Transport = &originToken{base: base, origin: origin(u), token: token}
	return &cc, nil
}

// originToken adds a Bearer token to requests for one origin.
type originToken struct {
	base   http.RoundTripper
	origin string
	token  string
}

func (t *originToken) RoundTrip(req *http.Request) (*http.Response, error) {
	if origin(req.URL) != t.origin {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(r)
}

// origin is scheme://host:port, with the scheme's default port made
// explicit, lower case.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
