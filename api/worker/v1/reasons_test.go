package workerv1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestReasonsTable: every Reason constant of the contract is in Reasons,
// with a class and a hint, and is a reason Validate accepts. A reason
// declared without its class would reach the controller unexplained.
func TestReasonsTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			collectReasons(t, s.(*ast.ValueSpec), declared)
		}
	}
	checkReasons(t, declared)
}

// collectReasons adds vs's Reason constants to declared, by name.
func collectReasons(t *testing.T, vs *ast.ValueSpec, declared map[string]string) {
	for i, name := range vs.Names {
		if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
			continue
		}
		lit, ok := vs.Values[i].(*ast.BasicLit)
		if !ok {
			t.Errorf("%s is not a string literal", name.Name)
			continue
		}
		v, _ := strconv.Unquote(lit.Value)
		declared[name.Name] = v
	}
}

func checkReasons(t *testing.T, declared map[string]string) {
	if len(declared) < 20 {
		t.Fatalf("found %d Reason constants in reasons.go, want every worker reason", len(declared))
	}
	seen := map[string]string{}
	for name, v := range declared {
		if other, dup := seen[v]; dup {
			t.Errorf("%s and %s both declare %q", name, other, v)
		}
		seen[v] = name
		info, ok := Reasons[v]
		if !ok {
			t.Errorf("%s (%q) is not in Reasons", name, v)
			continue
		}
		if info.Class != Permanent && info.Class != Retryable && info.Class != ByCause {
			t.Errorf("Reasons[%s].Class = %q", name, info.Class)
		}
		if info.Hint == "" {
			t.Errorf("Reasons[%s] has no hint", name)
		}
		if !reasonRE.MatchString(v) {
			t.Errorf("%s = %q is not a reason Validate accepts", name, v)
		}
	}
	if len(Reasons) != len(declared) {
		t.Errorf("Reasons has %d entries, reasons.go declares %d constants", len(Reasons), len(declared))
	}
}
