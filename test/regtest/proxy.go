package regtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// Counter counts the request body bytes a client sent through a Proxy, so a
// test can prove what was (not) uploaded without trusting the client.
type Counter struct {
	uploaded atomic.Int64
	requests atomic.Int64
	patches  atomic.Int64
}

// Uploaded is the number of request body bytes sent so far.
func (c *Counter) Uploaded() int64 { return c.uploaded.Load() }

// Requests is the number of requests so far.
func (c *Counter) Requests() int64 { return c.requests.Load() }

// Patches is the number of PATCH requests so far: blob uploads sent in
// chunks, as a client does that learns the digest only while it sends.
func (c *Counter) Patches() int64 { return c.patches.Load() }

// Reset zeroes the counters.
func (c *Counter) Reset() { c.uploaded.Store(0); c.requests.Store(0); c.patches.Store(0) }

// Proxy starts a reverse proxy to the registry at host and returns its
// "host:port". The Host header is kept, so upload Locations the registry
// hands out point back at the proxy and every byte passes through it.
func Proxy(t testing.TB, host string) (string, *Counter) {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: host}
	c := &Counter{}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.requests.Add(1)
		if r.Method == http.MethodPatch {
			c.patches.Add(1)
		}
		if r.Body != nil {
			r.Body = &countingBody{ReadCloser: r.Body, n: &c.uploaded}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u.Host, c
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
