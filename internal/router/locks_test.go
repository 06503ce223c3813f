package router

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The router takes its one mutex in one place, Router.locked
// (docs/router.md, "Locks on the request path"): a new Lock call, or a
// new mutex, anywhere in the package's code fails here.
func TestRouterLocksOnlyInLocked(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var sites, mutexes []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if n.Sel.Name == "Lock" || n.Sel.Name == "RLock" {
						where := fset.Position(n.Pos()).String()
						if ok {
							where += " in " + fn.Name.Name
						}
						sites = append(sites, where)
					}
					if x, isIdent := n.X.(*ast.Ident); isIdent && x.Name == "sync" && strings.HasSuffix(n.Sel.Name, "Mutex") {
						mutexes = append(mutexes, fset.Position(n.Pos()).String())
					}
				}
				return true
			})
		}
	}
	if len(sites) != 1 || !strings.HasSuffix(sites[0], " in locked") {
		t.Errorf("lock calls %v, want exactly one, in Router.locked", sites)
	}
	if len(mutexes) != 1 {
		t.Errorf("mutexes declared at %v, want only Router.mu", mutexes)
	}
}
