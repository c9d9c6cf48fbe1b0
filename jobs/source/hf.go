package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/packline/packline/api/redact"
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

// regexpSHA is a Git object id, as the Hub names a revision and a blob.
var regexpSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

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
		URL: redact.Public(endpoint + "/" + s.Repo), Time: info.LastModified,
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

// hfModelInfo asks the Hub API for the repository at rev: the commit and
// every file with its size and identity.
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

// hfSelect keeps the files include and exclude select, refusing a name
// that would leave the download folder.
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
