package push

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"oras.land/oras-go/v2/registry/remote"

	"github.com/packline/packline/jobs/kitfile"
	"github.com/packline/packline/jobs/registry"
)

// modelFiles is a small model folder with every Kitfile kind.
var modelFiles = map[string]string{
	"model.safetensors":     "weights-0123456789",
	"config.json":           `{"hidden":1}`,
	"tokenizer.json":        `{"vocab":[]}`,
	"README.md":             "# model\n",
	"data/train.csv":        "a,b\n1,2\n",
	"scripts/convert.py":    "print('hi')\n",
	"nested/deep/part.gguf": "gguf-bytes",
}

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func generated(t testing.TB, root string) *kitfile.Kitfile {
	t.Helper()
	dir, err := kitfile.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	kf := kitfile.Generate(dir)
	kf.Package.Name = "test"
	if err := kitfile.Validate(kf, root); err != nil {
		t.Fatal(err)
	}
	return kf
}

func repoAt(t testing.TB, host, name string, o registry.Options) *remote.Repository {
	t.Helper()
	o.PlainHTTP = true
	repo, err := registry.Repository(host+"/"+name, o)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// dockerConfig writes a config.json with user:pass for host and returns its folder.
func dockerConfig(t testing.TB, host, user, pass string) string {
	t.Helper()
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func pushTree(t testing.TB, repo *remote.Repository, root string, o Options) (string, Stats, error) {
	t.Helper()
	desc, st, err := Push(context.Background(), repo, root, generated(t, root), o)
	return desc.Digest.String(), st, err
}

// sameTimes sets every file and folder under root to one fixed time.
func sameTimes(t testing.TB, root string) {
	t.Helper()
	when := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// counter counts the bytes written to it.
type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
