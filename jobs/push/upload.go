package push

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/packline/packline/jobs/internal/pack"
)

// streamBlob uploads what write produces without knowing its digest first:
// POST starts an upload session, one streamed PATCH sends the bytes while we
// hash them, and PUT ?digest= closes the session with the digest we computed
// (the distribution spec's chunked upload, with a single chunk of unknown
// length). The bytes are read from disk once and never staged.
//
// When the digest is known already (known, from a pack.Prehash), nothing
// is hashed and the bytes go in the PUT itself, after the POST: the
// monolithic upload that kit's push of a packed layer makes. The registry
// checks the digest either way; a mismatch is errDigestMismatch.
//
// oras-go's blob Push needs the digest up front, which would mean reading
// every layer twice; this is the one place we speak HTTP ourselves.
func streamBlob(ctx context.Context, repo *remote.Repository, write func(io.Writer) error, known digest.Digest) (digest.Digest, int64, error) {
	ctx = auth.AppendRepositoryScope(ctx, repo.Reference, auth.ActionPull, auth.ActionPush)
	scheme := "https"
	if repo.PlainHTTP {
		scheme = "http"
	}
	start := fmt.Sprintf("%s://%s/v2/%s/blobs/uploads/", scheme, repo.Reference.Host(), repo.Reference.Repository)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, start, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := repo.Client.Do(req)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", 0, responseError(resp)
	}
	// The PATCH body cannot be replayed after an auth challenge, so reuse
	// the credentials the POST settled on, as oras-go does for its PUT.
	authz := resp.Request.Header.Get("Authorization")
	loc, err := location(resp)
	if err != nil {
		return "", 0, err
	}

	if known != "" {
		return putKnown(ctx, repo, loc, authz, write, known)
	}
	body := &streamBody{write: write, hash: sha256.New()}
	resp, complete, err := send(ctx, repo, http.MethodPatch, loc, authz, body)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent {
		return "", 0, responseError(resp)
	}
	if !complete {
		return "", 0, answeredEarly(repo)
	}
	if loc, err = location(resp); err != nil {
		return "", 0, err
	}
	dgst := digest.NewDigest(digest.SHA256, body.hash)
	resp, _, err = send(ctx, repo, http.MethodPut, withDigest(loc, dgst), authz, nil)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", 0, responseError(resp)
	}
	return dgst, body.n, nil
}

// errDigestMismatch: the registry found other bytes than a known digest
// said, so the digest was wrong (never the bytes: they are the files').
var errDigestMismatch = errors.New("the registry computed another digest for the layer than the one hashed while it was downloaded")

// putKnown sends the layer in the PUT that closes the upload session
// opened at loc, under its known digest.
func putKnown(ctx context.Context, repo *remote.Repository, loc *url.URL, authz string, write func(io.Writer) error, known digest.Digest) (digest.Digest, int64, error) {
	body := &streamBody{write: write}
	resp, complete, err := send(ctx, repo, http.MethodPut, withDigest(loc, known), authz, body)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		err := responseError(resp)
		var e *errcode.ErrorResponse
		if errors.As(err, &e) && slices.ContainsFunc(e.Errors, func(x errcode.Error) bool { return x.Code == errcode.ErrorCodeDigestInvalid }) {
			return "", 0, fmt.Errorf("%w (%s)", errDigestMismatch, known)
		}
		return "", 0, err
	}
	if !complete {
		return "", 0, answeredEarly(repo)
	}
	return known, body.n, nil
}

// send makes one request of an upload session at loc, with the
// credentials the POST settled on, carrying body if it is set. The body
// has no length: HTTP/1.1 then copies it with WriteTo, straight from the
// files into the connection. complete says whether all of the body was
// sent before the answer (see streamBody.finish).
func send(ctx context.Context, repo *remote.Repository, method string, loc *url.URL, authz string, body *streamBody) (resp *http.Response, complete bool, err error) {
	var rb io.Reader = http.NoBody
	if body != nil {
		rb = body
	}
	req, err := http.NewRequestWithContext(ctx, method, loc.String(), rb)
	if err != nil {
		return nil, false, err
	}
	if body != nil {
		req.ContentLength = -1
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err = repo.Client.Do(req)
	if body != nil {
		var werr error
		if complete, werr = body.finish(); werr != nil {
			// The writer's own error (a file that vanished) says more
			// than the transport's.
			err = werr
		}
	}
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, false, err
	}
	return resp, complete, nil
}

// withDigest is loc with ?digest=d, which closes an upload session.
func withDigest(loc *url.URL, d digest.Digest) *url.URL {
	u := *loc
	q := u.Query()
	q.Set("digest", d.String())
	u.RawQuery = q.Encode()
	return &u
}

func answeredEarly(repo *remote.Repository) error {
	return fmt.Errorf("registry %s accepted the upload of a layer before it was all sent", repo.Reference.Host())
}

// location resolves the upload Location against the request, refusing a
// different host so credentials never leave the registry.
func location(resp *http.Response) (*url.URL, error) {
	loc, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("registry gave no upload location: %w", err)
	}
	if loc.Host != resp.Request.URL.Host {
		return nil, fmt.Errorf("upload location %q is on another host than %q", loc.Host, resp.Request.URL.Host)
	}
	return loc, nil
}

// responseError turns a failed response into oras-go's error type so that
// failure.Registry classifies it like any other registry error.
func responseError(resp *http.Response) error {
	e := &errcode.ErrorResponse{Method: resp.Request.Method, URL: resp.Request.URL, StatusCode: resp.StatusCode}
	var body struct {
		Errors errcode.Errors `json:"errors"`
	}
	if b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); err == nil && json.Unmarshal(b, &body) == nil {
		e.Errors = body.Errors
	}
	return e
}

// streamBody is the PATCH body: write's output, hashed and counted as it
// goes. HTTP/1.1's transport copies a body with io.Copy, which calls
// WriteTo: write then sends straight into the connection, in the pieces it
// reads files in (1 MiB), with no goroutine, pipe or extra copy between. A
// transport that reads instead (HTTP/2) gets the same bytes through a pipe.
type streamBody struct {
	write func(io.Writer) error
	hash  hash.Hash
	n     int64

	mu      sync.Mutex
	started bool
	pr      *io.PipeReader // the Read path's pipe, once started
	done    chan error     // write's result (nil for a failed connection)
}

// Write feeds the hash (unless the digest is known) and the count.
func (b *streamBody) Write(p []byte) (int, error) {
	if b.hash != nil {
		b.hash.Write(p)
	}
	b.n += int64(len(p))
	return len(p), nil
}

func (b *streamBody) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	ok := b.startLocked()
	b.mu.Unlock()
	if !ok {
		return 0, errors.New("upload body read twice")
	}
	conn := &errWriter{w: w}
	err := b.write(io.MultiWriter(conn, b))
	if conn.err != nil {
		// The connection failed: the transport's error says why.
		b.done <- conn.err
	} else {
		b.done <- err
	}
	return b.n, err
}

func (b *streamBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.pr == nil {
		if !b.startLocked() {
			b.mu.Unlock()
			return 0, errors.New("upload body read twice")
		}
		pr, pw := io.Pipe()
		b.pr = pr
		go func() {
			err := b.write(io.MultiWriter(pw, b))
			pw.CloseWithError(err)
			b.done <- err
		}()
	}
	pr := b.pr
	b.mu.Unlock()
	return pr.Read(p)
}

func (b *streamBody) startLocked() bool {
	if b.started {
		return false
	}
	b.started, b.done = true, make(chan error, 1)
	return true
}

// finish is called once the request is over. It reports whether write
// sent everything (only then are the hash and count whole), and write's own
// error (a file that vanished), which says more than the transport's. It
// stops a pipe writer that the transport stopped reading. A registry that
// answers before the whole body was sent gets complete false, never a
// digest of part of the layer.
func (b *streamBody) finish() (complete bool, err error) {
	b.mu.Lock()
	started, pr := b.started, b.pr
	b.mu.Unlock()
	if !started {
		return false, nil
	}
	var werr error
	if pr != nil {
		pr.CloseWithError(io.ErrClosedPipe)
		werr = <-b.done
	} else {
		// WriteTo runs on the transport's goroutine and has returned
		// before any complete upload was answered.
		select {
		case werr = <-b.done:
		default:
			return false, nil
		}
	}
	var conn *connError
	switch {
	case werr == nil:
		return true, nil
	case errors.Is(werr, io.ErrClosedPipe), errors.As(werr, &conn):
		return false, nil
	}
	return false, werr
}

// errWriter remembers the connection's write error, wrapped as connError so
// that finish can tell it from write's own.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = &connError{err}
	}
	return n, err
}

type connError struct{ error }

func (e *connError) Unwrap() error { return e.error }

// smallLayer is the most a layer may hold to be packed in memory.
const smallLayer = 1 << 20

// small reports a layer whose files fit in memory.
func small(items []pack.Item) bool {
	var n int64
	for _, it := range items {
		n += it.Size
	}
	return n <= smallLayer
}

// putSmall packs a small layer in memory, so that its digest is known
// before anything is sent: a HEAD skips it when the registry has it, and
// otherwise oras-go's monolithic upload (POST, then PUT with the body)
// takes one round trip less than streamBlob's POST, PATCH, PUT. Config,
// tokenizer and README layers are this size.
func putSmall(ctx context.Context, repo *remote.Repository, mediaType string, write func(io.Writer) error) (digest.Digest, int64, bool, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return "", 0, false, err
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(buf.Bytes()), Size: int64(buf.Len())}
	exists, err := repo.Blobs().Exists(ctx, desc)
	if err != nil || exists {
		return desc.Digest, desc.Size, false, err
	}
	return desc.Digest, desc.Size, true, repo.Blobs().Push(ctx, desc, bytes.NewReader(buf.Bytes()))
}
