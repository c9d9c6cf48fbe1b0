package hfserver

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"
)

// A throttled download takes about size/rate: the e2e progress test relies
// on a worker staying mid-download while bytes move.
func TestThrottle(t *testing.T) {
	repo := Repo{Files: map[string][]byte{"model.safetensors": bytes.Repeat([]byte{1}, 300<<10)}}
	s, err := Start(map[string]Repo{"org/m": repo})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	restore := s.Throttle(1 << 20) // 300 KiB at 1 MiB/s: about 0.3 s
	defer restore()
	start := time.Now()
	resp, err := http.Get(s.URL + "/org/m/resolve/" + repo.Commit() + "/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(b) != 300<<10 {
		t.Fatalf("read %d bytes, err %v", len(b), err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("300 KiB at 1 MiB/s took %s, want about 300ms", d)
	}
}
