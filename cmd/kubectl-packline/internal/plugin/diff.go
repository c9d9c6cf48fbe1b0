package plugin

import (
	"fmt"
	"sort"
	"strings"
)

// maxDiffLines bounds the line diff's quadratic table: a file longer than
// this is reported as changed, without its lines.
const maxDiffLines = 4000

// DiffFiles compares the manifests a Claim pushed (old) with a new render,
// file by file, in name order: a file only in one side is added or
// removed whole; a changed file shows its lines as "-" and "+" around
// unchanged " " lines. Empty when nothing changed.
func DiffFiles(old, cur map[string]string) string {
	names := map[string]bool{}
	for n := range old {
		names[n] = true
	}
	for n := range cur {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	for _, n := range sorted {
		o, inOld := old[n]
		c, inCur := cur[n]
		switch {
		case inOld && inCur && o == c:
			continue
		case !inOld:
			fmt.Fprintf(&b, "+++ %s (new)\n", n)
		case !inCur:
			fmt.Fprintf(&b, "--- %s (removed)\n", n)
		default:
			fmt.Fprintf(&b, "--- %s (pushed)\n+++ %s (rendered)\n", n, n)
		}
		b.WriteString(DiffLines(splitLines(o), splitLines(c)))
	}
	return b.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// DiffLines is a longest-common-subsequence line diff.
func DiffLines(a, b []string) string {
	if len(a) > maxDiffLines || len(b) > maxDiffLines {
		return fmt.Sprintf("  (%d lines before, %d after: too long to show)\n", len(a), len(b))
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out.WriteString(" " + a[i] + "\n")
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("-" + a[i] + "\n")
			i++
		default:
			out.WriteString("+" + b[j] + "\n")
			j++
		}
	}
	return out.String()
}
