package netx

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// ceiling is how long a test waits for a stalled transfer to fail before
// it gives up and reports that nothing bounded it.
const ceiling = 20 * time.Second

// stallingServer sends half a body, then neither sends nor closes until
// the test ends.
func stallingServer(t *testing.T) string {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2048")
		w.Write(bytes.Repeat([]byte("x"), 1024))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv.URL
}

// TestStalledDownloadFails: a server that stops mid-body fails the read
// with a timeout once Idle passes without a byte.
func TestStalledDownloadFails(t *testing.T) {
	t.Cleanup(func() { SetIdle(0) })
	SetIdle(200 * time.Millisecond)
	url := stallingServer(t)
	done := make(chan error, 1)
	go func() {
		resp, err := Client().Get(url)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("got %v, want a timeout", err)
		}
	case <-time.After(ceiling):
		t.Fatalf("a stalled download was still running after %s", ceiling)
	}
}

// TestSlowUploadIsNotIdle: an upload that takes many times Idle, but moves
// every so often, succeeds although no response byte arrives until it ends.
func TestSlowUploadIsNotIdle(t *testing.T) {
	t.Cleanup(func() { SetIdle(0) })
	SetIdle(300 * time.Millisecond)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Write([]byte{byte(n / 1024)})
	}))
	t.Cleanup(srv.Close)

	pr, pw := io.Pipe()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond) // pacing the upload, one chunk a tick
		defer tick.Stop()
		for range 10 { // 1 s in all, over three times Idle
			<-tick.C
			if _, err := pw.Write(bytes.Repeat([]byte("u"), 1024)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	resp, err := Client().Post(srv.URL, "application/octet-stream", pr)
	if err != nil {
		t.Fatalf("slow upload failed: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if len(b) != 1 || b[0] != 10 {
		t.Errorf("server saw %v KiB, want 10", b)
	}
}
