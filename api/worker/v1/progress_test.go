package workerv1

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProgress(t *testing.T) {
	cases := []struct {
		name string
		line string
		want Progress
		ok   bool
	}{
		{"download", `packline-progress: {"step":"download","done":10,"total":100,"rate":5}`, Progress{Step: StepDownload, Done: 10, Total: 100, Rate: 5}, true},
		{"step only", `packline-progress: {"step":"render"}`, Progress{Step: StepRender}, true},
		{"carriage return", "packline-progress: {\"step\":\"clone\"}\r", Progress{Step: StepClone}, true},
		{"no prefix", `{"step":"download","done":10}`, Progress{}, false},
		{"prefix not at start", `x packline-progress: {"step":"download"}`, Progress{}, false},
		{"unknown step", `packline-progress: {"step":"exfiltrate"}`, Progress{}, false},
		{"deliver is the manager's", `packline-progress: {"step":"deliver"}`, Progress{}, false},
		{"unknown field", `packline-progress: {"step":"push","name":"x"}`, Progress{}, false},
		{"trailing data", `packline-progress: {"step":"push"} {"step":"push"}`, Progress{}, false},
		{"trailing text", `packline-progress: {"step":"push"}x`, Progress{}, false},
		{"negative", `packline-progress: {"step":"download","done":-1}`, Progress{}, false},
		{"too large", `packline-progress: {"step":"download","total":1125899906842625}`, Progress{}, false},
		{"float", `packline-progress: {"step":"download","done":1.5}`, Progress{}, false},
		{"string number", `packline-progress: {"step":"download","done":"1"}`, Progress{}, false},
		{"cut", `packline-progress: {"step":"download","do`, Progress{}, false},
		{"too long", `packline-progress: {"step":"download"` + strings.Repeat(" ", MaxProgressLine) + `}`, Progress{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ParseProgress(c.line)
			if ok != c.ok {
				t.Fatalf("ok = %t, want %t", ok, c.ok)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLastProgress(t *testing.T) {
	line := func(p Progress) string {
		var b bytes.Buffer
		WriteProgress(&b, p)
		return b.String()
	}
	first, second := Progress{Step: StepDownload, Done: 1, Total: 9}, Progress{Step: StepDownload, Done: 5, Total: 9, Rate: 2}
	cases := []struct {
		name string
		tail string
		want Progress
		ok   bool
	}{
		{"empty", "", Progress{}, false},
		{"none", "download: 1/9 MiB\nlayer a uploaded\n", Progress{}, false},
		{"last wins", line(first) + "other\n" + line(second) + "download: 5/9 MiB\n", second, true},
		{"no trailing newline", line(first) + strings.TrimSuffix(line(second), "\n"), second, true},
		// limitBytes cut the newest line: the one before counts.
		{"last cut", line(first) + line(second)[:20], first, true},
		// A tenant's file name holding a newline and a forged line with
		// an unknown field or step is no progress line.
		{"forged", line(first) + "layer a\n" + `packline-progress: {"step":"download","done":1,"msg":"hi"}` + "\n", first, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := LastProgress([]byte(c.tail))
			if ok != c.ok {
				t.Fatalf("ok = %t, want %t", ok, c.ok)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteProgressDropsInvalid(t *testing.T) {
	var b bytes.Buffer
	WriteProgress(&b, Progress{Step: "bogus"})
	WriteProgress(&b, Progress{Step: StepDownload, Done: -1})
	if b.Len() != 0 {
		t.Errorf("wrote %q for invalid progress", b.String())
	}
	WriteProgress(&b, Progress{Step: StepPush, Done: MaxProgressBytes, Total: MaxProgressBytes, Rate: MaxProgressBytes})
	if got := b.Len(); got > MaxProgressLine {
		t.Errorf("largest line is %d bytes, over MaxProgressLine %d", got, MaxProgressLine)
	}
}
