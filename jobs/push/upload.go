package push

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/packline/packline/jobs/pack"
)

// streamBlob uploads what write produces without knowing its digest first:
// POST starts an upload session, one streamed PATCH sends the bytes while we
// hash them, and PUT ?digest= closes the session with the digest we computed
// (the distribution spec's chunked upload, with a single chunk of unknown
// length). The bytes are read from disk once and never staged.
//
// oras-go's blob Push needs the digest up front, which would mean reading
// every layer twice; this is the one place we speak HTTP ourselves.
func streamBlob(ctx context.Context, repo *remote.Repository, write func(io.Writer) error) (digest.Digest, int64, error) {
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

	pr, pw := io.Pipe()
	h := sha256.New()
	cw := &counter{}
	go func() {
		pw.CloseWithError(write(io.MultiWriter(pw, h, cw)))
	}()
	req, err = http.NewRequestWithContext(ctx, http.MethodPatch, loc.String(), pr)
	if err != nil {
		pr.CloseWithError(err)
		return "", 0, err
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/octet-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err = repo.Client.Do(req)
	// Stop the writer if the request ended early, and surface its error
	// (a file that vanished) over the transport's.
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent {
		return "", 0, responseError(resp)
	}
	if loc, err = location(resp); err != nil {
		return "", 0, err
	}

	dgst := digest.NewDigest(digest.SHA256, h)
	q := loc.Query()
	q.Set("digest", dgst.String())
	loc.RawQuery = q.Encode()
	req, err = http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), http.NoBody)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err = repo.Client.Do(req)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", 0, responseError(resp)
	}
	return dgst, cw.n, nil
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

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

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
