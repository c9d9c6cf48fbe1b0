package guard

import (
	"bytes"
	"fmt"
	"math"
	"path"

	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/jobs/failure"
)

// Size is an estimate of what a kustomization renders: how many objects
// and how many bytes of resource files, each counted as many times as the
// kustomization graph includes it.
type Size struct {
	Objects int64
	Bytes   int64
}

func (s Size) add(o Size, times int64) Size {
	return Size{Objects: satAdd(s.Objects, satMul(o.Objects, times)), Bytes: satAdd(s.Bytes, satMul(o.Bytes, times))}
}

// Estimate computes, before krusty runs, what dir's kustomization renders:
// the documents of every resource file plus one object per generator, with
// a base counted once per path that includes it. Nested bases that each
// add a namePrefix multiply objects (6 bases of 6 bases of … give 6^n
// objects from a few dozen files); krusty would build all of them in
// memory before any limit on its output could apply. The walk is memoised,
// so it is linear in the number of files however large the product is,
// and the arithmetic saturates instead of overflowing. Estimate expects a
// tree Check accepted.
func (t Tree) Estimate(dir string) (Size, error) {
	memo := map[string]Size{}
	return t.estimate(path.Clean(dir), memo, map[string]bool{})
}

func (t Tree) estimate(dir string, memo map[string]Size, onPath map[string]bool) (Size, error) {
	if s, ok := memo[dir]; ok {
		return s, nil
	}
	if onPath[dir] {
		return Size{}, failure.Permanent(workerv1.ReasonRenderFailed, fmt.Errorf("%s includes itself", t.display(dir)))
	}
	onPath[dir] = true
	defer delete(onPath, dir)
	k, _, err := t.load(dir)
	if err != nil {
		return Size{}, err
	}
	var s Size
	for _, list := range [][]string{k.Resources, k.Components, k.Bases, k.Generators} {
		for _, r := range list {
			var sub Size
			switch p := path.Clean(path.Join(dir, r)); {
			case IsRemote(r) || !t.FS.Exists(p):
				// An inline generator or a name Check refused.
				sub = Size{Objects: 1, Bytes: int64(len(r))}
			case t.FS.IsDir(p):
				if sub, err = t.estimate(p, memo, onPath); err != nil {
					return Size{}, err
				}
			default:
				b, err := t.FS.ReadFile(p)
				if err != nil {
					return Size{}, err
				}
				sub = Size{Objects: documents(b), Bytes: int64(len(b))}
			}
			s = s.add(sub, 1)
		}
	}
	s.Objects = satAdd(s.Objects, int64(len(k.ConfigMapGenerator)+len(k.SecretGenerator)))
	memo[dir] = s
	return s, nil
}

// documents counts the YAML documents in b: "---" separator lines, plus
// one for a file that does not start with one.
func documents(b []byte) int64 {
	n := int64(0)
	for i, line := range bytes.Split(b, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("---")) && len(bytes.TrimSpace(line[3:])) == 0 {
			n++
		} else if i == 0 && len(bytes.TrimSpace(line)) > 0 {
			n++
		}
	}
	return max(n, 1)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
