package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// hfDownloadAll fetches files at commit sha into root, hfWorkers at a
// time, printing progress; see hfDownload for one file.
func hfDownloadAll(ctx context.Context, env Env, endpoint, repo, sha, root string, files []hfFile, tee Tee) error {
	var total int64
	for _, f := range files {
		if f.size > 0 {
			total += f.size
		}
	}
	p := newProgress(env.Log, total)
	defer p.stop()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan hfFile)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range hfWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				var w io.Writer
				if tee != nil {
					w = tee(f.name)
				}
				if err := hfDownload(ctx, env, endpoint, repo, sha, root, f, p, w); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		}()
	}
	for _, f := range files {
		select {
		case work <- f:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// hfDownload fetches one file into root, resuming from "<name>.part". A
// download from the start is also written to tee, if set.
func hfDownload(ctx context.Context, env Env, endpoint, repo, sha, root string, f hfFile, p *progress, tee io.Writer) error {
	final := filepath.Join(root, filepath.FromSlash(f.name))
	if fi, err := os.Stat(final); err == nil && (f.size < 0 || fi.Size() == f.size) {
		p.add(fi.Size())
		return nil // finished in an earlier attempt (verified before its rename)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	part := final + ".part"
	var offset int64
	if fi, err := os.Stat(part); err == nil {
		offset = fi.Size()
	}
	if f.size >= 0 && offset == f.size {
		// Complete but not renamed: the run stopped between the two.
		return finish(part, final, f, p, offset)
	}
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", endpoint, repo, sha, escapePath(f.name))
	resp, err := hfGet(ctx, env, u, offset)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	flags := os.O_CREATE | os.O_WRONLY
	switch {
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		flags |= os.O_APPEND
		p.add(offset)
	case resp.StatusCode == http.StatusOK:
		flags |= os.O_TRUNC // server ignored Range: start over
	default:
		return failure.HTTPStatus(resp.StatusCode, fmt.Errorf("downloading %s: %s", f.name, resp.Status))
	}
	out, err := os.OpenFile(part, flags, 0o644)
	if err != nil {
		return err
	}
	// A download from the start is hashed as it is written, so that
	// verify need not read the file again; a resumed one is read back.
	var h hash.Hash
	w := []io.Writer{out}
	if flags&os.O_APPEND == 0 && f.sha256 != "" {
		h = sha256.New()
		w = append(w, h)
	}
	if flags&os.O_APPEND == 0 && tee != nil {
		w = append(w, tee)
	}
	dst := io.Writer(out)
	if len(w) > 1 {
		dst = io.MultiWriter(w...)
	}
	_, err = io.Copy(dst, &countingReader{r: resp.Body, p: p})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return failure.Retryable(workerv1.ReasonSourceFailed, fmt.Errorf("downloading %s: %w", f.name, err))
	}
	if h != nil {
		f.hashed = hex.EncodeToString(h.Sum(nil))
	}
	return finish(part, final, f, nil, 0)
}

func finish(part, final string, f hfFile, p *progress, counted int64) error {
	if p != nil {
		p.add(counted)
	}
	if err := verify(part, f); err != nil {
		os.Remove(part) // a corrupt partial must not be resumed
		return err
	}
	return os.Rename(part, final)
}

func verify(file string, f hfFile) error {
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	if f.size >= 0 && fi.Size() != f.size {
		return failure.Retryable(workerv1.ReasonChecksum, fmt.Errorf("%s is %d bytes, want %d", f.name, fi.Size(), f.size))
	}
	if f.sha256 == "" {
		return nil
	}
	got := f.hashed
	if got == "" {
		r, err := os.Open(file)
		if err != nil {
			return err
		}
		defer r.Close()
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			return err
		}
		got = hex.EncodeToString(h.Sum(nil))
	}
	if got != f.sha256 {
		return failure.Permanent(workerv1.ReasonChecksum, fmt.Errorf("%s has sha256 %s, want %s", f.name, got, f.sha256))
	}
	return nil
}

// hfGet sends a GET with an optional Range; env.HTTP is hfClient's, which
// adds the token where it belongs.
func hfGet(ctx context.Context, env Env, u string, offset int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, failure.Permanent(workerv1.ReasonInvalidSpec, err)
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := env.HTTP.Do(req)
	if err != nil {
		return nil, failure.Retryable(workerv1.ReasonSourceFailed, err)
	}
	return resp, nil
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i := range parts {
		parts[i] = url.PathEscape(parts[i])
	}
	return strings.Join(parts, "/")
}
