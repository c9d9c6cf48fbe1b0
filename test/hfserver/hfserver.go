// Package hfserver is a small Hugging Face Hub stand-in for the sandbox and
// the e2e tests: it answers the two endpoints the worker calls (model info
// at a revision, and resolve/<commit>/<file>) for repositories held in
// memory. It is a library rather than a test helper because `make demo`
// runs it too.
package hfserver

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Repo is one model repository: its files at a single commit.
type Repo struct {
	Files map[string][]byte
}

// Commit is the repository's deterministic commit id: the same files give
// the same id, so the sourceRevision in status is stable across runs.
func (r Repo) Commit() string {
	h := sha1.New()
	for _, name := range r.names() {
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(r.Files[name])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (r Repo) names() []string {
	var n []string
	for k := range r.Files {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Server serves repositories by name ("org/model").
type Server struct {
	// URL is the endpoint to put into spec.source.huggingFace.endpoint.
	URL string

	mu    sync.Mutex
	repos map[string]Repo
	// infos caches each repository's commit and model info: hashing the
	// files on every request would make the fixture, not the client, the
	// cost a benchmark measures (the Hub serves these precomputed).
	infos map[string]info
	gate  chan struct{} // when set, file downloads wait for it to close
	// rate, when set, paces file downloads to that many bytes per second.
	rate int64
	srv  *http.Server
	ln   net.Listener
}

// Start serves on a free loopback port until Close.
func Start(repos map[string]Repo) (*Server, error) { return StartOn("127.0.0.1", repos) }

// StartOn serves on a free port of the address ip until Close (the
// sandbox's real node has its pods reach the fixture on a bridge address).
func StartOn(ip string, repos map[string]Repo) (*Server, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), repos: map[string]Repo{}, infos: map[string]info{}, ln: ln}
	for k, v := range repos {
		s.Set(k, v)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Set adds or replaces a repository.
func (s *Server) Set(name string, r Repo) {
	inf := repoInfo(name, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[name] = r
	s.infos[name] = inf
}

// Hold makes file downloads block until the returned release is called, so
// a test can act while a worker is known to be mid-run.
func (s *Server) Hold() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := make(chan struct{})
	s.gate = g
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.gate == g {
				s.gate = nil
			}
			s.mu.Unlock()
			close(g)
		})
	}
}

// Throttle paces file downloads to bytesPerSecond until the returned
// restore is called, so that a test sees a worker mid-download for as long
// as the size allows (status.progress) while bytes still move. It applies
// to downloads that start after the call.
func (s *Server) Throttle(bytesPerSecond int64) (restore func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate = bytesPerSecond
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rate = 0
	}
}

// pacedWriter writes at most rate/10 bytes per tenth of a second, flushing
// each chunk so the client receives it then.
type pacedWriter struct {
	w    http.ResponseWriter
	rate int64
	done <-chan struct{}
	tick *time.Ticker // nil until the first chunk went out
}

func (p *pacedWriter) Header() http.Header { return p.w.Header() }
func (p *pacedWriter) WriteHeader(c int)   { p.w.WriteHeader(c) }

func (p *pacedWriter) Write(b []byte) (int, error) {
	chunk := max(int(p.rate/10), 1)
	n := 0
	for n < len(b) {
		if p.tick == nil {
			p.tick = time.NewTicker(100 * time.Millisecond)
		} else {
			select {
			case <-p.tick.C:
			case <-p.done:
				return n, http.ErrHandlerTimeout
			}
		}
		m, err := p.w.Write(b[n:min(n+chunk, len(b))])
		n += m
		if err != nil {
			return n, err
		}
		if f, ok := p.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	return n, nil
}

func (p *pacedWriter) stop() {
	if p.tick != nil {
		p.tick.Stop()
	}
}

type lfs struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

type sibling struct {
	RFilename string `json:"rfilename"`
	Size      int64  `json:"size"`
	BlobID    string `json:"blobId"`
	LFS       *lfs   `json:"lfs,omitempty"`
}

type info struct {
	ID       string    `json:"id"`
	SHA      string    `json:"sha"`
	Siblings []sibling `json:"siblings"`
}

// ServeHTTP answers /api/models/<org>/<name>/revision/<rev> (with each
// file's size, blobId, and lfs sha256 and size for weights, as the Hub's
// ?blobs=true does) and
// /<org>/<name>/resolve/<commit>/<file>, as the Hub does.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	if rest, ok := strings.CutPrefix(p, "api/models/"); ok {
		s.modelInfo(w, rest)
		return
	}
	parts := strings.SplitN(p, "/", 5) // org, name, "resolve", commit, file
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo, inf, ok := s.repo(parts[0] + "/" + parts[1])
	if !ok || parts[3] != inf.SHA {
		http.NotFound(w, r)
		return
	}
	b, ok := repo.Files[parts[4]]
	if !ok {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	gate, rate := s.gate, s.rate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if rate > 0 {
		pw := &pacedWriter{w: w, rate: rate, done: r.Context().Done()}
		defer pw.stop()
		w = pw
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

func (s *Server) modelInfo(w http.ResponseWriter, rest string) {
	parts := strings.SplitN(rest, "/", 4) // org, name, "revision", rev
	if len(parts) != 4 || parts[2] != "revision" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	name := parts[0] + "/" + parts[1]
	_, out, ok := s.repo(name)
	if !ok || (parts[3] != "main" && parts[3] != out.SHA) {
		http.Error(w, "Repository not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// gitBlobID is git's object id of a blob, which the Hub reports as blobId
// (for an LFS file, the id of its pointer; here, of the bytes: only its
// stability matters to a client).
func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (s *Server) repo(name string) (Repo, info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.repos[name]
	return r, s.infos[name], ok
}

// repoInfo is what the Hub's model info says of r.
func repoInfo(name string, r Repo) info {
	out := info{ID: name, SHA: r.Commit()}
	for _, n := range r.names() {
		b := r.Files[n]
		sib := sibling{RFilename: n, Size: int64(len(b)), BlobID: gitBlobID(b)}
		// The Hub reports a sha256 for LFS files only; large weights are LFS.
		if strings.HasSuffix(n, ".safetensors") || strings.HasSuffix(n, ".bin") || strings.HasSuffix(n, ".gguf") {
			sum := sha256.Sum256(b)
			sib.LFS = &lfs{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))}
		}
		out.Siblings = append(out.Siblings, sib)
	}
	return out
}

// TinyModel is the fixture the samples point at: a few small files shaped
// like a real model repository.
func TinyModel() Repo {
	return Repo{Files: map[string][]byte{
		"config.json":       []byte(`{"architectures":["TinyForCausalLM"],"hidden_size":8,"num_hidden_layers":1}` + "\n"),
		"model.safetensors": bytes.Repeat([]byte{0x2a}, 64<<10),
		"tokenizer.json":    []byte(`{"version":"1.0","model":{"type":"BPE"}}` + "\n"),
		"README.md":         []byte("# tiny-model\n\nA sandbox fixture.\n"),
		"pytorch_model.bin": bytes.Repeat([]byte{0x07}, 16<<10),
	}}
}
