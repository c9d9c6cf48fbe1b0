package procnode

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The kubelet API's log endpoint, which the API server proxies for `kubectl
// logs` (pods/log): GET /containerLogs/{namespace}/{pod}/{container}, with
// tailLines and limitBytes. Only the API server may call it: the TLS config requires its
// kubelet client certificate, as a real kubelet's authentication does.
// Nothing else of the kubelet API is served.

// serveLogs listens on 127.0.0.1 and returns the port.
func (n *Node) serveLogs(ctx context.Context) (int, error) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", n.o.Kubelet)
	if err != nil {
		return 0, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.containerLogs)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

func (n *Node) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, pod, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	for _, s := range []string{ns, pod, ctr} {
		if !nameRE.MatchString(s) || strings.Contains(s, "..") {
			http.Error(w, "bad name", http.StatusBadRequest)
			return
		}
	}
	path, err := n.logFile(ns, pod, ctr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if t := r.URL.Query().Get("tailLines"); t != "" {
		lines, err := strconv.Atoi(t)
		if err != nil || lines < 0 {
			http.Error(w, "bad tailLines", http.StatusBadRequest)
			return
		}
		b = tail(path, lines, len(b))
		if len(b) > 0 {
			b = append(b, '\n')
		}
	}
	// limitBytes, like the kubelet's, keeps the first bytes of what
	// tailLines selected.
	if l := r.URL.Query().Get("limitBytes"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			http.Error(w, "bad limitBytes", http.StatusBadRequest)
			return
		}
		b = b[:min(n, len(b))]
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(b)
}

// logFile is the newest log of the container among the pods of that
// name (a pod deleted and made again has a new UID, so a new folder).
func (n *Node) logFile(ns, pod, ctr string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(n.o.Dir, "pods", ns+"_"+pod+"_*", ctr+".log"))
	var best string
	var bestTime time.Time
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.ModTime().After(bestTime) {
			best, bestTime = m, fi.ModTime()
		}
	}
	if best == "" {
		return "", errors.New("no log for container " + ctr + " of pod " + ns + "/" + pod)
	}
	return best, nil
}
