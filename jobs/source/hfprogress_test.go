package source

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

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
