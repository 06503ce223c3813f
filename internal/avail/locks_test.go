package avail

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxMutexes is how many mutexes avail and lifecycle may declare between
// them: avail's publication lock, which also serializes the lifecycle
// manager (lifecycle has none).
const maxMutexes = 1

// No function of avail or lifecycle journals or probes while it holds a
// mutex, directly or through a call in these packages, and the two
// declare at most maxMutexes mutexes: a slow engine or a slow disk never
// stalls whoever waits for the lock.
func TestNoLockAroundIO(t *testing.T) {
	fset := token.NewFileSet()
	own, pure := parseDir(t, fset, "."), parseDir(t, fset, filepath.Join("..", "lifecycle"))
	files := append(own, pure...)
	// lifecycle is a pure core: it calls nothing that does I/O, so its
	// functions never count as I/O (a lifecycle method and an avail one
	// may share a name: Restore, Drain).
	if io := ioFuncs(pure); len(io) > 0 {
		t.Errorf("lifecycle functions do I/O: %v", io)
	}
	for _, f := range lockedIO(fset, files, ioFuncs(own)) {
		t.Errorf("%s", f)
	}
	if m := mutexSites(fset, files); len(m) > maxMutexes {
		t.Errorf("%d mutexes declared at %v, want at most %d", len(m), m, maxMutexes)
	}
}

// The scanner finds a journal write under a lock, a probe reached
// through a helper under a deferred unlock and any I/O in a Locked
// helper, and passes the same calls made after the unlock.
func TestLockScannerFindsViolations(t *testing.T) {
	src := `package p
func (s *S) bad1() { s.mu.Lock(); s.journal.Event(e); s.mu.Unlock() }
func (s *S) check() error { return s.probes.Health(ctx, "x") }
func (s *S) bad2() { s.mu.Lock(); defer s.mu.Unlock(); if true { s.check() } }
func (s *S) bad3Locked() { for { s.check() } }
func (s *S) good() { s.mu.Lock(); x := 1; s.mu.Unlock(); s.journal.Event(e); s.check() }
func (s *S) good2() { s.mu.Lock(); for q { s.mu.Unlock(); s.check(); s.mu.Lock() }; s.mu.Unlock() }
var m sync.Mutex
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lockedIO(fset, []*ast.File{f}, ioFuncs([]*ast.File{f})), "\n")
	for _, want := range []string{"in bad1", "in bad2", "in bad3Locked"} {
		if !strings.Contains(got, want) {
			t.Errorf("no finding %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "in good") || strings.Count(got, "\n") != 2 {
		t.Errorf("want exactly the three bad functions, got:\n%s", got)
	}
	if n := len(mutexSites(fset, []*ast.File{f})); n != 1 {
		t.Errorf("%d mutexes counted, want 1", n)
	}
}

func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var out []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", e.Name(), err)
		}
		out = append(out, f)
	}
	return out
}

// directIO is a call that is I/O by itself: a method of the probes, the
// prober or the journal writer (s.probes.Health, p.Prober.KVTransfer,
// s.journal.Event).
func directIO(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	field, ok := sel.X.(*ast.SelectorExpr)
	return ok && (field.Sel.Name == "probes" || field.Sel.Name == "Prober" || field.Sel.Name == "journal")
}

// callee is a call's function or method name.
func callee(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// ioFuncs names the functions that do I/O, directly or through another
// one (by name: a method and a function of one name count as one).
func ioFuncs(files []*ast.File) map[string]bool {
	calls := map[string][]*ast.CallExpr{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						calls[fn.Name.Name] = append(calls[fn.Name.Name], c)
					}
					return true
				})
			}
		}
	}
	io := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name, cs := range calls {
			for _, c := range cs {
				if !io[name] && (directIO(c) || io[callee(c)]) {
					io[name], changed = true, true
				}
			}
		}
	}
	return io
}

// lockedIO lists every call made in files while a mutex is held that is
// I/O directly or names a function of io.
func lockedIO(fset *token.FileSet, files []*ast.File, io map[string]bool) []string {
	w := lockWalk{fset: fset, io: io}
	for _, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				w.fn = fn.Name.Name
				w.list(fn.Body.List, strings.HasSuffix(fn.Name.Name, "Locked"))
			}
		}
	}
	return w.found
}

// lockWalk follows Lock and Unlock through a function's statements in
// order; a nested block starts with its parent's state, and what it
// changes stays inside it (a branch that unlocks returns or relocks).
type lockWalk struct {
	fset  *token.FileSet
	io    map[string]bool
	fn    string
	found []string
}

func (w *lockWalk) list(stmts []ast.Stmt, held bool) {
	for _, st := range stmts {
		switch lockOp(st) {
		case "Lock", "RLock":
			held = true
		case "Unlock", "RUnlock":
			held = false
		default:
			w.stmt(st, held)
		}
	}
}

func (w *lockWalk) stmt(st ast.Stmt, held bool) {
	switch s := st.(type) {
	case *ast.BlockStmt:
		w.list(s.List, held)
	case *ast.IfStmt:
		w.nodes(held, s.Init, s.Cond)
		w.list(s.Body.List, held)
		if s.Else != nil {
			w.stmt(s.Else, held)
		}
	case *ast.ForStmt:
		w.nodes(held, s.Init, s.Cond, s.Post)
		w.list(s.Body.List, held)
	case *ast.RangeStmt:
		w.nodes(held, s.X)
		w.list(s.Body.List, held)
	case *ast.SwitchStmt:
		w.nodes(held, s.Init, s.Tag)
		w.clauses(s.Body, held)
	case *ast.TypeSwitchStmt:
		w.nodes(held, s.Init, s.Assign)
		w.clauses(s.Body, held)
	case *ast.SelectStmt:
		w.clauses(s.Body, held)
	case *ast.LabeledStmt:
		w.stmt(s.Stmt, held)
	case *ast.DeferStmt:
		if op := callee(s.Call); op != "Unlock" && op != "RUnlock" {
			w.nodes(held, s)
		}
	default:
		w.nodes(held, st)
	}
}

func (w *lockWalk) clauses(body *ast.BlockStmt, held bool) {
	for _, c := range body.List {
		switch c := c.(type) {
		case *ast.CaseClause:
			for _, e := range c.List {
				w.nodes(held, e)
			}
			w.list(c.Body, held)
		case *ast.CommClause:
			w.nodes(held, c.Comm)
			w.list(c.Body, held)
		}
	}
}

// nodes reports the I/O calls in ns when held.
func (w *lockWalk) nodes(held bool, ns ...ast.Node) {
	if !held {
		return
	}
	for _, n := range ns {
		if n == nil { // an absent Init or Cond
			continue
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && (directIO(c) || w.io[callee(c)]) {
				w.found = append(w.found, w.fset.Position(c.Pos()).String()+": "+callee(c)+" under a lock in "+w.fn)
			}
			return true
		})
	}
}

// lockOp is "Lock", "Unlock", … when st is a bare mutex call.
func lockOp(st ast.Stmt) string {
	es, ok := st.(*ast.ExprStmt)
	if !ok {
		return ""
	}
	c, ok := es.X.(*ast.CallExpr)
	if !ok || len(c.Args) != 0 {
		return ""
	}
	switch op := callee(c); op {
	case "Lock", "RLock", "Unlock", "RUnlock":
		return op
	}
	return ""
}

// mutexSites lists where a sync mutex type is named.
func mutexSites(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "sync" && strings.HasSuffix(sel.Sel.Name, "Mutex") {
					out = append(out, fset.Position(sel.Pos()).String())
				}
			}
			return true
		})
	}
	return out
}
