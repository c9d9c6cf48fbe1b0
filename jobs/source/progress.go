package source

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// progress prints bytes, rate and ETA at most every interval.
type progress struct {
	done  atomic.Int64
	total int64
	start time.Time
	quit  chan struct{}
	wg    sync.WaitGroup
}

var progressInterval = 5 * time.Second

func newProgress(w io.Writer, total int64) *progress {
	p := &progress{total: total, start: time.Now(), quit: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				p.print(w)
				return
			case <-t.C:
				p.print(w)
			}
		}
	}()
	return p
}

func (p *progress) add(n int64) { p.done.Add(n) }

func (p *progress) print(w io.Writer) {
	done := p.done.Load()
	secs := time.Since(p.start).Seconds()
	rate := float64(done) / max(secs, 0.001)
	eta := "?"
	if rate > 0 && p.total > done {
		eta = (time.Duration(float64(p.total-done)/rate) * time.Second).Round(time.Second).String()
	} else if p.total > 0 && done >= p.total {
		eta = "0s"
	}
	fmt.Fprintf(w, "download: %d/%d MiB, %.1f MiB/s, ETA %s\n", done>>20, p.total>>20, rate/(1<<20), eta)
	// The same in the form the manager reads into status.progress.
	workerv1.WriteProgress(w, workerv1.Progress{Step: workerv1.StepDownload, Done: done, Total: max(p.total, 0), Rate: int64(rate)})
}

func (p *progress) stop() { close(p.quit); p.wg.Wait() }

type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(int64(n))
	return n, err
}
