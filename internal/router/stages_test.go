package router

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// A call's state is split by the stage that owns it (call.go): the call
// itself and each stage type stay small, so a new field has to find the
// stage it belongs to rather than grow one god object again (issue 30's
// bound: at most 15 fields each).
func TestCallStagesStaySmall(t *testing.T) {
	const most = 15
	fields := structFields(t)
	for _, name := range []string{"call", "exchange", "admission", "sizing", "attempts", "rowFacts"} {
		n, ok := fields[name]
		switch {
		case !ok:
			t.Errorf("type %s is gone: keep call.go's stage types, or update this list with the new split", name)
		case n > most:
			t.Errorf("type %s has %d fields, want at most %d: put the new state in the stage that owns it", name, n, most)
		}
	}
}

// structFields counts the fields of every struct type declared in the
// package's non-test files.
func structFields(t *testing.T) map[string]int {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatalf("list the router package: %v", err)
	}
	out := map[string]int{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", e.Name(), err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					out[ts.Name.Name] += max(1, len(fl.Names))
				}
			}
			return false
		})
	}
	return out
}
