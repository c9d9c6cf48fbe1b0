// Package benchenv reads the settings the benchmarks share.
package benchenv

import (
	"os"
	"strconv"
	"testing"
)

// Bytes is the benchmark's data size: PACKLINE_BENCH_BYTES, else def.
func Bytes(tb testing.TB, def int64) int64 {
	s := os.Getenv("PACKLINE_BENCH_BYTES")
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		tb.Fatalf("PACKLINE_BENCH_BYTES=%q: not a positive byte count", s)
	}
	return n
}
