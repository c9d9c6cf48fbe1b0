package render_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
	"github.com/packline/packline/test/regtest"
)

func dockerConfig(t *testing.T, host, user, pass string) string {
	t.Helper()
	dir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	doc := `{"auths":{"` + host + `":{"auth":"` + auth + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRealRegistry pushes to distribution's registry with htpasswd auth:
// the right credentials push and pull back, wrong ones are a permanent
// auth failure, a stopped registry is a retryable one.
func TestRealRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a registry process")
	}
	srv := serveFixture(t)
	reg := regtest.StartWith(t, regtest.Options{Users: map[string]string{"pusher": "s3cret"}})

	t.Run("push and pull", func(t *testing.T) {
		t.Setenv(workerv1.EnvDockerConfig, dockerConfig(t, reg.Host, "pusher", "s3cret"))
		res, err := runClaim(t, pushClaim(srv.URL, reg.Host, "claims/team-a/code", "v1", map[string]any{"replicas": 2}, t))
		if err != nil {
			t.Fatal(err)
		}
		p := pull(t, res)
		if got := p.manifest.Annotations["org.opencontainers.image.revision"]; got != "main@sha1:"+srv.Commits[0] {
			t.Errorf("revision annotation %q", got)
		}
		if len(untar(t, p.layer)) == 0 {
			t.Error("empty layer")
		}
	})
	t.Run("denied", func(t *testing.T) {
		t.Setenv(workerv1.EnvDockerConfig, dockerConfig(t, reg.Host, "pusher", "wrong"))
		_, err := runClaim(t, pushClaim(srv.URL, reg.Host, "claims/team-a/code", "v1", nil, t))
		var fe *failure.Error
		if !errors.As(err, &fe) || fe.Reason != workerv1.ReasonRegistryAuth || !fe.Permanent {
			t.Fatalf("want permanent %s, got %v", workerv1.ReasonRegistryAuth, err)
		}
	})
	t.Run("registry down", func(t *testing.T) {
		t.Setenv(workerv1.EnvDockerConfig, dockerConfig(t, reg.Host, "pusher", "s3cret"))
		reg.Stop()
		_, err := runClaim(t, pushClaim(srv.URL, reg.Host, "claims/team-a/code", "v2", nil, t))
		var fe *failure.Error
		if !errors.As(err, &fe) || fe.Permanent {
			t.Fatalf("want a retryable failure, got %v", err)
		}
	})
}
