package imagebuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParsePlatforms(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "linux/amd64,linux/arm64", want: "linux/amd64,linux/arm64"},
		{in: " linux/arm/v7 ,", want: "linux/arm/v7"},
		{in: "darwin/arm64", err: "want linux"},
		{in: "linux/amd64,linux/amd64", err: "twice"},
		{in: ",", err: "no platform"},
	} {
		got, err := ParsePlatforms(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, ",") != tc.want {
			t.Errorf("%q: got %v", tc.in, s)
		}
	}
}

// TestMissingCACertsFailsFirst: without a CA bundle the images could not
// reach any TLS registry, and the error must come before minutes of
// compiling.
func TestMissingCACertsFailsFirst(t *testing.T) {
	o := testOptions(t)
	o.CACerts = filepath.Join(t.TempDir(), "missing.crt")
	o.ModuleDir = t.TempDir() // compiling here would fail differently
	start := time.Now()
	_, err := Build(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "ca-certificates") {
		t.Fatalf("err = %v, want a CA certificates error", err)
	}
	if !strings.Contains(err.Error(), o.CACerts) {
		t.Errorf("error does not name the path: %v", err)
	}
	t.Logf("failed after %s: %v", time.Since(start), err)

	notPEM := filepath.Join(t.TempDir(), "empty.crt")
	if err := os.WriteFile(notPEM, []byte("nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.CACerts = notPEM
	if _, err := Build(context.Background(), o); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("err = %v, want a no-PEM error", err)
	}
}

// TestLayerDependsOnContentOnly: the order files are listed in does not
// change the digest, and a changed byte or time does.
func TestLayerDependsOnContentOnly(t *testing.T) {
	at := time.Unix(1700000000, 0)
	a := []entry{{path: "etc", dir: true, mode: 0o755}, {path: "etc/x", mode: 0o644, data: []byte("x")}}
	b := []entry{a[1], a[0]}
	digest := func(mtime time.Time, es []entry) string {
		l, err := layer(mtime, append([]entry(nil), es...))
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if digest(at, a) != digest(at, b) {
		t.Error("entry order changed the layer digest")
	}
	changed := []entry{a[0], {path: "etc/x", mode: 0o644, data: []byte("y")}}
	if digest(at, a) == digest(at, changed) {
		t.Error("changed content kept the digest")
	}
	if digest(at, a) == digest(at.Add(time.Second), a) {
		t.Error("changed build time kept the digest")
	}
}

// TestGitProvenance: the build time is the commit time, so rebuilding a
// commit later gives the same digest; SOURCE_DATE_EPOCH overrides it.
func TestGitProvenance(t *testing.T) {
	dir := t.TempDir()
	run := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run(nil, "init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(nil, "add", "f")
	date := []string{"GIT_COMMITTER_DATE=2024-01-02T03:04:05Z", "GIT_AUTHOR_DATE=2024-01-02T03:04:05Z"}
	run(append(date, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"), "commit", "-q", "-m", "c")

	t.Setenv("SOURCE_DATE_EPOCH", "")
	p, err := GitProvenance(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC); !p.Created.Equal(want) {
		t.Errorf("created %s, want the commit time %s", p.Created, want)
	}
	if len(p.Revision) != 40 || !strings.HasPrefix(p.Revision, p.Version) {
		t.Errorf("revision %q version %q", p.Revision, p.Version)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "42")
	if p, err = GitProvenance(dir); err != nil {
		t.Fatal(err)
	}
	if !p.Created.Equal(time.Unix(42, 0)) || !strings.HasSuffix(p.Version, "-dirty") {
		t.Errorf("created %s version %q, want epoch 42 and a -dirty version", p.Created, p.Version)
	}
}
