package push

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/packline/packline/jobs/internal/pack"
)

// cache remembers the digest of each layer keyed by what went into it (names,
// sizes, modes, modification times, inodes, media type), so an unchanged re-push
// learns its digests without reading a byte and asks the registry whether it
// already has them. A stale entry cannot corrupt anything: the registry checks
// every digest we give it, and a miss simply uploads.
type cache struct {
	path string
	mu   sync.Mutex
	m    map[string]cached
}

type cached struct {
	Digest digest.Digest `json:"digest"`
	DiffID digest.Digest `json:"diffId"`
	Size   int64         `json:"size"`
}

func openCache(dir string) *cache {
	c := &cache{m: map[string]cached{}}
	if dir == "" {
		return c
	}
	c.path = filepath.Join(dir, "layers.json")
	if b, err := os.ReadFile(c.path); err == nil {
		_ = json.Unmarshal(b, &c.m) // a corrupt cache is an empty one
	}
	return c
}

func (c *cache) get(key string) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *cache) put(key string, v cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = v
}

// save writes the cache atomically; failing to save only costs a re-upload.
func (c *cache) save() error {
	if c.path == "" {
		return nil
	}
	c.mu.Lock()
	b, err := json.Marshal(c.m)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.path)
}

func cacheKey(mediaType string, items []pack.Item) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", mediaType)
	for _, it := range items {
		fmt.Fprintf(h, "%q %t %d %o %d %d\n", it.Name, it.Dir, it.Size, it.Mode, it.ModTime.UnixNano(), it.Ino)
	}
	return hex.EncodeToString(h.Sum(nil))
}
