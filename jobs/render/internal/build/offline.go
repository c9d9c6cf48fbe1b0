package build

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
)

// krusty gives no way to choose the HTTP client its file loader fetches
// remote files with, nor the cloner it runs `git` with for a remote base:
// both live in kustomize's internal packages. The loader builds a bare
// http.Client, which sends through http.DefaultTransport as it is at the
// time of the request, and the cloner runs the git binary with this
// process's environment. So, for the duration of a build only, the worker
// points http.DefaultTransport at a transport that refuses every request,
// and sets GIT_ALLOW_PROTOCOL to a value that allows no git transport at
// all. Whatever a kustomization manages to ask for, nothing leaves the
// pod. This is process-wide state: builds hold offlineMu, and nothing else
// in a `worker claim` runs while it renders (the template is cloned before,
// the push happens after, each on clients with their own transports).

var offlineMu sync.Mutex

// errOffline is what every HTTP request made during a build fails with.
var errOffline = errors.New("renders have no network access")

// refusing is an http.RoundTripper that records and refuses every request.
type refusing struct{ tried *atomic.Value }

func (r refusing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	r.tried.CompareAndSwap(nil, req.URL.Redacted())
	return nil, fmt.Errorf("fetching %s: %w", req.URL.Redacted(), errOffline)
}

// gitNoProtocol is GIT_ALLOW_PROTOCOL during a build: a list naming no real
// protocol, so git refuses http(s), ssh, git, file and ext alike.
const gitNoProtocol = "none-renders-have-no-network"

// offline runs f with HTTP and git cut off, and returns what f returned
// plus the first URL something tried to fetch, if any.
func offline(f func() error) (tried string, err error) {
	offlineMu.Lock()
	defer offlineMu.Unlock()

	var seen atomic.Value
	savedTransport := http.DefaultTransport
	http.DefaultTransport = refusing{tried: &seen}
	defer func() { http.DefaultTransport = savedTransport }()

	savedGit, hadGit := os.LookupEnv("GIT_ALLOW_PROTOCOL")
	os.Setenv("GIT_ALLOW_PROTOCOL", gitNoProtocol)
	defer func() {
		if hadGit {
			os.Setenv("GIT_ALLOW_PROTOCOL", savedGit)
		} else {
			os.Unsetenv("GIT_ALLOW_PROTOCOL")
		}
	}()

	err = f()
	if u, ok := seen.Load().(string); ok {
		tried = u
	}
	return tried, err
}
