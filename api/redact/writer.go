package redact

import (
	"bytes"
	"io"
	"sync"
)

// maxLine bounds what a Writer holds while waiting for a newline; a longer
// line is redacted and written in pieces.
const maxLine = 64 << 10

// Writer redacts what is written to it, a line at a time, before passing it
// on. It is safe for concurrent use. Close writes a last unterminated line.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer that writes redacted lines to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write buffers p and writes every complete line, redacted. It reports
// len(p) written unless the underlying writer fails.
func (rw *Writer) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.buf = append(rw.buf, p...)
	for {
		i := bytes.IndexByte(rw.buf, '\n')
		if i < 0 && len(rw.buf) < maxLine {
			return len(p), nil
		}
		n := i + 1
		if i < 0 {
			n = len(rw.buf)
		}
		line := String(string(rw.buf[:n]))
		rw.buf = rw.buf[n:]
		if _, err := io.WriteString(rw.w, line); err != nil {
			return len(p), err
		}
	}
}

// Close writes what is left in the buffer, redacted.
func (rw *Writer) Close() error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if len(rw.buf) == 0 {
		return nil
	}
	line := String(string(rw.buf))
	rw.buf = nil
	_, err := io.WriteString(rw.w, line)
	return err
}
