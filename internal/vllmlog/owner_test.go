package vllmlog

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// failureWordings are regexps outside this package allowed to contain a
// memory line's needle: diagnose's failure taxonomy reads the whole of
// vLLM's KV-needed ValueError ([k1]) as a failure, of which the memory
// table reads only the available KV figure.
var failureWordings = map[string]PatternID{
	"internal/diagnose/taxonomy_matchers.go": PatV1KVNeededError,
}

// TestOneReaderOfMemoryLines: no regexp outside vllmlog spells one of
// vLLM's memory-accounting lines again (issue 30: two vLLM log readers
// had grown two tables). A string literal counts as a regexp when it has
// regexp syntax; it is compared with its escapes removed.
func TestOneReaderOfMemoryLines(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/vllmlog" || (rel != "." && strings.HasPrefix(d.Name(), ".")) || d.Name() == "testdata" || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		for _, lit := range regexpLiterals(f) {
			if id, ok := respells(lit.Value); ok && failureWordings[rel] != id {
				t.Errorf("%s: a regexp spells vLLM's memory line %s again; read it through vllmlog.MemoryPatterns", fset.Position(lit.Pos()), id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d source files checked: is the tree where this test expects it?", checked)
	}
}

// regexpLiterals are f's string literals that are regexps: those inside
// the arguments of a call that compiles one (regexp.MustCompile, Compile,
// or a helper named re, opt or pat), and any literal with regexp syntax.
func regexpLiterals(f *ast.File) []*ast.BasicLit {
	var out []*ast.BasicLit
	seen := map[*ast.BasicLit]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if compiles(n.Fun) {
				for _, a := range n.Args {
					ast.Inspect(a, func(m ast.Node) bool {
						if lit, ok := m.(*ast.BasicLit); ok && lit.Kind == token.STRING && !seen[lit] {
							seen[lit] = true
							out = append(out, lit)
						}
						return true
					})
				}
			}
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && looksLikeRegexp(s) && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		return true
	})
	return out
}

func compiles(fun ast.Expr) bool {
	name := ""
	switch f := fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		name = f.Sel.Name
	}
	switch name {
	case "MustCompile", "Compile", "MustCompilePOSIX", "re", "opt", "pat":
		return true
	}
	return false
}

// respells reports whether a regexp's Go string literal contains a memory
// pattern's needle once its escapes are removed.
func respells(quoted string) (PatternID, bool) {
	s, err := strconv.Unquote(quoted)
	if err != nil {
		return "", false
	}
	plain := strings.ReplaceAll(s, `\`, "")
	for _, p := range memoryPatterns {
		if len(p.Needle) >= 10 && strings.Contains(plain, p.Needle) {
			return p.ID, true
		}
	}
	return "", false
}

func looksLikeRegexp(s string) bool {
	for _, m := range []string{`\(`, `[0-9]`, `(?:`, `\s`, `\d`, `\b`, `+)`, `*)`, `\.`} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
