package failure

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	workerv1 "github.com/packline/packline/api/worker/v1"
)

// wrapRE finds the worker's Permanent/Retryable calls with a contract reason.
var wrapRE = regexp.MustCompile(`\b(Permanent|Retryable)\(workerv1\.(Reason\w+)`)

// TestWorkerKeepsReasonClasses: wherever the worker (cmd/worker, jobs/)
// wraps an error as Permanent or Retryable, the reason's class in
// workerv1.Reasons allows it. The table is what the controller and the
// docs rely on; a call that contradicts it is a bug in one of the two.
func TestWorkerKeepsReasonClasses(t *testing.T) {
	values := reasonValues(t, "../../api/worker/v1/reasons.go")
	calls := 0
	for _, root := range []string{"../../jobs", "../../cmd/worker"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range wrapRE.FindAllStringSubmatch(string(src), -1) {
				calls++
				info := workerv1.Reasons[values[m[2]]]
				if info.Class != workerv1.ByCause && string(info.Class) != m[1] {
					t.Errorf("%s: %s(workerv1.%s), but its class in workerv1.Reasons is %q", path, m[1], m[2], info.Class)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls < 50 {
		t.Fatalf("found %d Permanent/Retryable calls, want the worker's (is the pattern stale?)", calls)
	}
}

// reasonValues maps each Reason constant's name in path to its value.
func reasonValues(t *testing.T, path string) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if lit, ok := valueAt(vs, i).(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "Reason") {
				values[name.Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	return values
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}
