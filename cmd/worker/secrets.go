package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/packline/packline/api/redact"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// registerSecrets tells package redact every credential this pod carries,
// so that one never leaves the worker in a message or a log line even when
// it appears in no shape redact recognises by itself: HF_TOKEN, the files
// of the Git source Secret, of a private template's Secret and of the
// signing key Secret, and the passwords and tokens of every docker
// config.json mounted for pulling or pushing.
//
// It only reads the values to remove them from text; which credential goes
// where is decided by the code that uses them.
func registerSecrets() {
	redact.Add(os.Getenv(workerv1.EnvHFToken))
	registerSecretDir(envOr(EnvSourceAuthDir, workerv1.SourceAuthDir))
	registerSecretDir(envOr(EnvTemplateAuthDir, workerv1.TemplateAuthDir))
	registerSecretDir(envOr(EnvSigningKeyDir, workerv1.SigningKeyDir))
	for _, dir := range []string{os.Getenv(workerv1.EnvDockerConfig), envOr(EnvPullAuthDir, workerv1.PullAuthDir), workerv1.PushAuthDir} {
		if dir != "" {
			registerDockerConfig(filepath.Join(dir, "config.json"))
		}
	}
}

// notSecret are source Secret keys whose values are not credentials:
// hiding the user name or a host key would only blur messages.
var notSecret = map[string]bool{"username": true, "known_hosts": true, "ca.crt": true}

// registerSecretDir registers the content of each file in a mounted Secret
// (Kubernetes links each key to a file in a hidden "..data" folder).
func registerSecretDir(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || notSecret[e.Name()] {
			continue
		}
		b, err := readSmall(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		redact.Add(string(b))
		// A multi-line value (an SSH key) is removed line by line as well.
		for _, line := range strings.Split(string(b), "\n") {
			redact.Add(line)
		}
	}
}

// registerDockerConfig registers the credentials in a docker config.json.
func registerDockerConfig(path string) {
	b, err := readSmall(path)
	if err != nil {
		return
	}
	var cfg struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			Password      string `json:"password"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		log.Printf("redact: %s is not a docker config.json", path)
		return
	}
	for _, a := range cfg.Auths {
		redact.Add(a.Auth, a.Password, a.IdentityToken, a.RegistryToken)
		if dec, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
			if _, pass, ok := strings.Cut(string(dec), ":"); ok {
				redact.Add(pass)
			}
		}
	}
}

// readSmall reads at most 1 MiB of a regular file (following the links a
// Secret volume is made of).
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, os.ErrInvalid
	}
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// redactStderr sends everything written to os.Stderr (our logs, the log
// package's, and any library's) through redact.Writer to the real stderr,
// and returns the function that flushes it and restores os.Stderr.
func redactStderr() (restore func()) {
	orig := os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		log.Printf("redact: no pipe for stderr (%v): logging through the log package only", err)
		rw := redact.NewWriter(orig)
		log.SetOutput(rw)
		return func() { rw.Close(); log.SetOutput(orig) }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rw := redact.NewWriter(orig)
		io.Copy(rw, r)
		rw.Close()
		r.Close()
	}()
	os.Stderr = w
	log.SetOutput(w)
	return func() {
		os.Stderr = orig
		log.SetOutput(orig)
		w.Close()
		<-done
	}
}
