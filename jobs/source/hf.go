package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// DefaultHFEndpoint is used when neither the spec nor HF_ENDPOINT sets one.
const DefaultHFEndpoint = "https://huggingface.co"

// hfWorkers downloads at once: enough to fill a link, few enough for 2 CPUs.
const hfWorkers = 4

type hfInfo struct {
	SHA string `json:"sha"`
	// LastModified is the revision's commit time.
	LastModified time.Time `json:"lastModified"`
	Siblings     []struct {
		RFilename string `json:"rfilename"`
		Size      int64  `json:"size"`
		// BlobID is the file's git blob id (the Hub sends it with ?blobs=true).
		BlobID string `json:"blobId"`
		LFS    *struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		} `json:"lfs"`
	} `json:"siblings"`
}

type hfFile struct {
	name   string
	size   int64 // -1 when unknown
	sha256 string
	blobID string
	// hashed is the sha256 computed while downloading, if it was.
	hashed string
}

// id is the file's content identity for the packer's layer keys: the LFS
// sha256, else the git blob id; "" when the Hub gave neither.
func (f hfFile) id() string {
	switch {
	case regexpSHA256.MatchString(f.sha256):
		return "sha256:" + f.sha256
	case regexpSHA.MatchString(f.blobID):
		return "gitblob:" + f.blobID
	}
	return ""
}

var regexpSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// fetchHF resolves the revision to a commit with the Hub API, then downloads
// the selected files at that commit, resumably and concurrently.
func fetchHF(ctx context.Context, s v1alpha1.HuggingFaceSource, env Env) (Fetched, error) {
	endpoint := strings.TrimRight(firstOf(s.Endpoint, env.HFEndpoint, DefaultHFEndpoint), "/")
	rev := firstOf(s.Revision, "main")
	hc, err := hfClient(env.HTTP, endpoint, env.HFToken)
	if err != nil {
		return Fetched{}, err
	}
	env.HTTP = hc
	info, err := hfModelInfo(ctx, env, endpoint, s.Repo, rev)
	if err != nil {
		return Fetched{}, err
	}
	if !regexpSHA.MatchString(info.SHA) {
		return Fetched{}, failure.Retryable(workerv1.ReasonSourceFailed, fmt.Errorf("hugging face returned commit %q for %s@%s", info.SHA, s.Repo, rev))
	}
	files, err := hfSelect(info, s.Include, s.Exclude)
	if err != nil {
		return Fetched{}, err
	}
	// Not srcDir: finished files from an earlier attempt are kept and
	// skipped, and partial ones resumed.
	root := filepath.Join(env.Workspace, "hf", info.SHA)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Fetched{}, err
	}
	out := Fetched{
		Root: root, Revision: info.SHA, Name: path.Base(s.Repo),
		URL: publicURL(endpoint + "/" + s.Repo), Time: info.LastModified,
		FileIDs: map[string]string{},
	}
	for _, f := range files {
		if id := f.id(); id != "" {
			out.FileIDs[f.name] = id
		}
	}
	dl := func(ctx context.Context, files []hfFile, tee Tee) error {
		return hfDownloadAll(ctx, env, endpoint, s.Repo, info.SHA, root, files, tee)
	}
	if env.Lazy {
		return hfLazy(ctx, out, files, dl)
	}
	if err := dl(ctx, files, nil); err != nil {
		return Fetched{}, err
	}
	// The Hub keeps no modes: every file is 0644, whatever this pod's umask.
	if err := settle(root, info.LastModified); err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, err)
	}
	return out, nil
}

// hfLazy lays out the files in a tree of their own next to the download
// folder: a file downloaded by an earlier attempt is hard-linked in, any
// other is a sparse placeholder of its size until Complete downloads it
// and links it over. Placeholders never enter the download folder, so a
// retry can never take one for a finished download; the tree is rebuilt
// on every run.
func hfLazy(ctx context.Context, f Fetched, files []hfFile, download func(context.Context, []hfFile, Tee) error) (Fetched, error) {
	cache := f.Root
	tree := cache + ".tree"
	if err := os.RemoveAll(tree); err != nil {
		return Fetched{}, err
	}
	pending := map[string]hfFile{}
	var now []hfFile // unknown size: no placeholder possible
	for _, hf := range files {
		dst := filepath.Join(tree, filepath.FromSlash(hf.name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return Fetched{}, err
		}
		src := filepath.Join(cache, filepath.FromSlash(hf.name))
		if fi, err := os.Stat(src); err == nil && (hf.size < 0 || fi.Size() == hf.size) && os.Link(src, dst) == nil {
			continue
		}
		if hf.size < 0 {
			now = append(now, hf)
			continue
		}
		if err := placeholder(dst, hf.size); err != nil {
			return Fetched{}, err
		}
		pending[hf.name] = hf
	}
	link := func(hfs []hfFile) error {
		for _, hf := range hfs {
			dst := filepath.Join(tree, filepath.FromSlash(hf.name))
			if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			src := filepath.Join(cache, filepath.FromSlash(hf.name))
			if err := os.Link(src, dst); err != nil {
				if err := os.Rename(src, dst); err != nil {
					return err
				}
			}
			if err := os.Chmod(dst, 0o644); err != nil {
				return err
			}
			t := f.Time
			if t.IsZero() {
				t = epoch
			}
			if err := os.Chtimes(dst, t, t); err != nil {
				return err
			}
		}
		return nil
	}
	if len(now) > 0 {
		if err := download(ctx, now, nil); err != nil {
			return Fetched{}, err
		}
		if err := link(now); err != nil {
			return Fetched{}, err
		}
	}
	if err := settle(tree, f.Time); err != nil {
		return Fetched{}, failure.Permanent(workerv1.ReasonSourceFailed, err)
	}
	var mu sync.Mutex
	f.Root = tree
	f.Complete = func(ctx context.Context, names []string, tee Tee) error {
		mu.Lock()
		defer mu.Unlock()
		var want []hfFile
		for _, n := range names {
			if hf, ok := pending[n]; ok {
				want = append(want, hf)
			}
		}
		if len(want) == 0 {
			return nil
		}
		if err := download(ctx, want, tee); err != nil {
			return err
		}
		if err := link(want); err != nil {
			return err
		}
		for _, hf := range want {
			delete(pending, hf.name)
		}
		return nil
	}
	return f, nil
}

// placeholder creates a sparse file of size bytes: it takes no space and
// gives the packer the size its tar header needs.
func placeholder(p string, size int64) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func hfModelInfo(ctx context.Context, env Env, endpoint, repo, rev string) (*hfInfo, error) {
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", endpoint, repo, url.PathEscape(rev))
	resp, err := hfGet(ctx, env, u, 0)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, failure.HTTPStatus(resp.StatusCode, fmt.Errorf("hugging face %s@%s: %s", repo, rev, resp.Status))
	}
	var info hfInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return nil, failure.Retryable(workerv1.ReasonSourceFailed, fmt.Errorf("hugging face model info: %w", err))
	}
	return &info, nil
}

func hfSelect(info *hfInfo, include, exclude []string) ([]hfFile, error) {
	var out []hfFile
	for _, s := range info.Siblings {
		n := s.RFilename
		c := path.Clean(n)
		if n == "" || path.IsAbs(n) || c == ".." || strings.HasPrefix(c, "../") {
			return nil, failure.Permanent(workerv1.ReasonSourceFailed, fmt.Errorf("hugging face file name %q is unsafe", n))
		}
		if (len(include) > 0 && !matchAny(include, n)) || matchAny(exclude, n) {
			continue
		}
		f := hfFile{name: c, size: -1, blobID: s.BlobID}
		if s.LFS != nil {
			f.size, f.sha256 = s.LFS.Size, s.LFS.SHA256
		} else if s.Size > 0 {
			f.size = s.Size
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, failure.Permanent(workerv1.ReasonSourceNotFound, errors.New("no hugging face files match include/exclude"))
	}
	return out, nil
}

// matchAny matches glob patterns against the whole path, and patterns
// without a slash against the base name too ("*.safetensors").
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
		if !strings.Contains(p, "/") {
			if ok, _ := path.Match(p, path.Base(name)); ok {
				return true
			}
		}
	}
	return false
}

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
		return nil, failure.Permanent(workerv1.ReasonInvalidSpec, fmt.Errorf("hugging face endpoint %q is not an http(s) URL", redactURL(endpoint)))
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

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return redact(u)
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i := range parts {
		parts[i] = url.PathEscape(parts[i])
	}
	return strings.Join(parts, "/")
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// progress prints bytes, rate and ETA at most every interval.
type progress struct {
	done  atomic.Int64
	total int64
	start time.Time
	quit  chan struct{}
	wg    sync.WaitGroup
}

var progressInterval = 5 * time.Second

func newProgress(w io.Writer, total int64) *progress {
	p := &progress{total: total, start: time.Now(), quit: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				p.print(w)
				return
			case <-t.C:
				p.print(w)
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) { p.done.Add(n) }

func (p *progress) print(w io.Writer) {
	done := p.done.Load()
	secs := time.Since(p.start).Seconds()
	rate := float64(done) / max(secs, 0.001)
	eta := "?"
	if rate > 0 && p.total > done {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	} else if p.total > 0 && done >= p.total {
		eta = "0s"
	}
	fmt.Fprintf(w, "download: %d/%d MiB, %.1f MiB/s, ETA %s\n", done>>20, p.total>>20, rate/(1<<20), eta)
	// The same in the form the manager reads into status.progress.
	workerv1.WriteProgress(w, workerv1.Progress{Step: workerv1.StepDownload, Done: done, Total: max(p.total, 0), Rate: int64(rate)})
}

func (p *progress) stop() { close(p.quit); p.wg.Wait() }

type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(int64(n))
	return n, err
}
