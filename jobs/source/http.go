package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/packline/packline/api/redact"
	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/jobs/internal/pack"
	"github.com/packline/packline/jobs/kitfile"
)

// fetchHTTP downloads one file, checks its sha256 if given, and extracts it
// when it is an archive. The revision is the sha256 of the download.
func fetchHTTP(ctx context.Context, s v1alpha1.HTTPSource, env Env) (Fetched, error) {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return Fetched{}, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("http source url %q is not http(s)", s.URL))
	}
	name := path.Base(u.Path)
	if name == "/" || name == "." || name == ".." || name == "" {
		name = "download"
	}
	dl := filepath.Join(env.Workspace, ".packline", "download")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		return Fetched{}, err
	}
	file := filepath.Join(dl, name)
	var pre *pack.Prehash
	var prog *progress
	sum, modified, err := download(ctx, env.HTTP, s.URL, file, func(size int64) io.Writer {
		// Bytes, rate and ETA every 5 s, as for the Hub (status.progress),
		// while the bytes come: not through the checksum and extraction.
		prog = newProgress(env.Log, max(size, 0))
		counted := progressWriter{prog}
		// A plain file is its own layer at the root, 0644 once settled:
		// it is hashed as that layer while it downloads, so that pushing
		// it hashes nothing (pack.Prehash). Its length must be known.
		if archiveKind(name) != "" || size < 0 {
			return counted
		}
		p, ok := pack.NewPrehash([]pack.Item{{Name: name, Size: size, Mode: 0o644}})
		if !ok {
			return counted
		}
		pre = p
		return io.MultiWriter(p, counted)
	})
	if prog != nil {
		prog.stop()
	}
	if err != nil {
		return Fetched{}, err
	}
	if s.SHA256 != "" && sum != s.SHA256 {
		return Fetched{}, failure.Permanent(workerv1.ReasonChecksum, fmt.Errorf("download of %s has sha256 %s, want %s", redact.Public(u.String()), sum, s.SHA256))
	}
	root, err := srcDir(env, "src")
	if err != nil {
		return Fetched{}, err
	}
	switch kind := archiveKind(name); kind {
	case "tar", "tgz":
		f, err := os.Open(file)
		if err != nil {
			return Fetched{}, err
		}
		defer f.Close()
		err = extractTar(f, kind == "tgz", root, env.Archive)
		if err != nil {
			return Fetched{}, err
		}
	case "zip":
		if err := extractZip(file, root, env.Archive); err != nil {
			return Fetched{}, err
		}
	default:
		if err := os.Rename(file, filepath.Join(root, name)); err != nil {
			return Fetched{}, err
		}
		// A plain download has no mode of its own: 0644, and the
		// server's time for it.
		if err := settle(root, modified); err != nil {
			return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, err)
		}
	}
	ids, err := httpFileIDs(root, name, sum, archiveKind(name) != "")
	if err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, err)
	}
	out := Fetched{Root: root, Revision: "sha256:" + sum, Name: name, URL: redact.Public(u.String()), Time: modified, FileIDs: ids}
	if pre != nil {
		out.Prehashed = []*pack.Prehash{pre}
	}
	return out, nil
}

// httpFileIDs names the files of a download by its sha256, which the
// download computed anyway: a plain file by its content's, a file from an
// archive by the archive's (extraction is deterministic, and a layer's key
// adds each file's path). Nothing names a download before it is made
// (unless the spec states its sha256), so a re-run downloads again; with
// these ids it uploads no layer the registry has.
func httpFileIDs(root, name, sum string, archive bool) (map[string]string, error) {
	if !archive {
		return map[string]string{name: "sha256:" + sum}, nil
	}
	files, err := kitfile.List(root)
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, f := range files {
		ids[f.Path] = "in-archive:sha256:" + sum
	}
	return ids, nil
}

// download writes url to file and returns the hex sha256 of the bytes and
// the server's Last-Modified time (zero if it sent none). tee, given the
// response's length (-1 if unknown), may name a writer that gets the bytes
// too.
func download(ctx context.Context, c *http.Client, rawURL, file string, tee func(size int64) io.Writer) (string, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", time.Time{}, failure.Permanent(workerv1.ReasonInvalidSpec, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", time.Time{}, failure.Retryable(workerv1.ReasonSourceFailed, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		u, _ := url.Parse(rawURL)
		return "", time.Time{}, failure.HTTPStatus(resp.StatusCode, fmt.Errorf("GET %s: %s", redact.Public(u.String()), resp.Status))
	}
	f, err := os.Create(file)
	if err != nil {
		return "", time.Time{}, err
	}
	h := sha256.New()
	w := []io.Writer{f, h}
	if t := tee(resp.ContentLength); t != nil {
		w = append(w, t)
	}
	_, err = io.Copy(io.MultiWriter(w...), resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", time.Time{}, failure.Retryable(workerv1.ReasonSourceFailed, fmt.Errorf("downloading: %w", err))
	}
	modified, _ := http.ParseTime(resp.Header.Get("Last-Modified"))
	return hex.EncodeToString(h.Sum(nil)), modified, nil
}

// progressWriter counts the bytes written through it into a progress.
type progressWriter struct{ p *progress }

func (w progressWriter) Write(b []byte) (int, error) {
	w.p.add(int64(len(b)))
	return len(b), nil
}
