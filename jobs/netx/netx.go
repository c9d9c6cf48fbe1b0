// Package netx gives the worker's HTTP clients (Hugging Face, HTTP sources,
// Git over HTTP(S), OCI registries) an idle timeout: a transfer that makes
// no progress, in either direction, for Idle fails with a timeout error,
// which the failure package classifies as retryable. Whole transfers are
// not bounded, since a large model may take hours to download; only
// silence is.
//
// A connection counts as idle when neither a read nor a write has moved a
// byte for Idle. Reads alone cannot decide: while a large upload streams,
// net/http already waits for the response, and that wait must not expire
// as long as the upload moves.
package netx

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// DefaultIdle is how long a transfer may make no progress before it fails.
// A server that stops sending mid-body is noticed after this long; see
// Idle for how it adds up per client.
const DefaultIdle = 60 * time.Second

// idle is the timeout the constructors below use; the worker may change it
// once at start (SetIdle) before it builds any client.
var idle atomic.Int64

func init() { idle.Store(int64(DefaultIdle)) }

// SetIdle sets the idle timeout for clients built afterwards; d <= 0
// restores DefaultIdle.
func SetIdle(d time.Duration) {
	if d <= 0 {
		d = DefaultIdle
	}
	idle.Store(int64(d))
}

// Idle is the idle timeout clients are built with.
func Idle() time.Duration { return time.Duration(idle.Load()) }

// DialContext dials with a 30 s connect timeout and returns connections
// that fail after Idle without progress.
func DialContext(d time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ic := &idleConn{Conn: c, idle: d}
		ic.touch()
		return ic, nil
	}
}

// Transport returns a new transport with net/http's default settings (not
// a clone of http.DefaultTransport, which a render swaps out while it
// runs) whose connections time out after Idle without progress.
func Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           DialContext(Idle()),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
	}
}

// Client returns an HTTP client on Transport.
func Client() *http.Client { return &http.Client{Transport: Transport()} }

// InstallGit makes go-git use Transport for http:// and https:// remotes,
// process-wide (go-git takes no client per clone).
func InstallGit() {
	c := githttp.NewClient(&http.Client{Transport: Transport()})
	client.InstallProtocol("http", c)
	client.InstallProtocol("https", c)
}

// idleConn fails a Read or Write once no byte has moved either way for idle.
type idleConn struct {
	net.Conn
	idle time.Duration
	last atomic.Int64 // unix nanoseconds of the last progress
}

func (c *idleConn) touch() { c.last.Store(time.Now().UnixNano()) }

func (c *idleConn) Read(b []byte) (int, error) {
	// Wait for Idle from the later of this call and the last progress; if
	// a write moves meanwhile, wait on from there.
	base := time.Now().UnixNano()
	for {
		base = max(base, c.last.Load())
		if err := c.Conn.SetReadDeadline(time.Unix(0, base).Add(c.idle)); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(b)
		if n > 0 {
			c.touch()
		}
		if n == 0 && isTimeout(err) && c.last.Load() > base {
			continue // the other direction moved meanwhile: not idle
		}
		return n, err
	}
}

func (c *idleConn) Write(b []byte) (int, error) {
	written := 0
	for {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(b[written:])
		written += n
		if n > 0 {
			c.touch()
		}
		if err != nil && isTimeout(err) && n > 0 {
			continue // it moved, only slowly
		}
		return written, err
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
