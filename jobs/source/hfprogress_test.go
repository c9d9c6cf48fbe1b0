package source

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
)

// Every progress print carries a line the manager parses into
// status.progress (workerv1.LastProgress), beside the human one.
func TestProgressPrintsMachineLine(t *testing.T) {
	var out bytes.Buffer
	p := &progress{total: 100 << 20}
	p.add(40 << 20)
	p.print(&out)
	got, ok := workerv1.LastProgress(out.Bytes())
	if !ok {
		t.Fatalf("no progress line in %q", out.String())
	}
	got.Rate = 0 // depends on the clock
	if diff := cmp.Diff(workerv1.Progress{Step: workerv1.StepDownload, Done: 40 << 20, Total: 100 << 20}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// An HTTP(S) download prints the same progress lines as the Hub's.
func TestHTTPDownloadPrintsProgress(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 3<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	var log bytes.Buffer
	env := Env{Workspace: t.TempDir(), HTTP: srv.Client(), Log: &log}
	if _, err := fetchHTTP(context.Background(), v1alpha1.HTTPSource{URL: srv.URL + "/weights.bin"}, env); err != nil {
		t.Fatal(err)
	}
	got, ok := workerv1.LastProgress(log.Bytes())
	if !ok {
		t.Fatalf("no progress line in %q", log.String())
	}
	got.Rate = 0
	if diff := cmp.Diff(workerv1.Progress{Step: workerv1.StepDownload, Done: 3 << 10, Total: 3 << 10}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
