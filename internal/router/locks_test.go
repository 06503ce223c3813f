package router

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// The router takes its one mutex in one place, Router.locked
// (docs/router.md, "Locks on the request path"): a new Lock call, or a
// new mutex, anywhere in the package's code fails here.
func TestRouterLocksOnlyInLocked(t *testing.T) {
	sites, mutexes := lockSites(t)
	if len(sites) != 1 || !strings.HasSuffix(sites[0], " in locked") {
		t.Errorf("lock calls %v, want exactly one, in Router.locked", sites)
	}
	if len(mutexes) != 1 {
		t.Errorf("mutexes declared at %v, want only Router.mu", mutexes)
	}
}

// lockSites finds, in the package's non-test files, every Lock or RLock
// call (with the function it is in) and every sync mutex type named.
func lockSites(t *testing.T) (sites, mutexes []string) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatalf("list the router package: %v", err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", e.Name(), err)
		}
		for _, d := range f.Decls {
			fn, isFunc := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if sel.Sel.Name == "Lock" || sel.Sel.Name == "RLock" {
					where := fset.Position(sel.Pos()).String()
					if isFunc {
						where += " in " + fn.Name.Name
					}
					sites = append(sites, where)
				}
				if x, isIdent := sel.X.(*ast.Ident); isIdent && x.Name == "sync" && strings.HasSuffix(sel.Sel.Name, "Mutex") {
					mutexes = append(mutexes, fset.Position(sel.Pos()).String())
				}
				return true
			})
		}
	}
	return sites, mutexes
}
