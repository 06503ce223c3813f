package ports

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the house's limit on a function's length (docs/
// development.md: 60 lines is long), counted from func to closing brace.
const maxFuncLines = 60

// No non-test function in the module is longer than maxFuncLines: a
// longer one is split into steps named for what they do.
func TestNoFunctionOverSixtyLines(t *testing.T) {
	long, err := longFuncs(filepath.Join("..", ".."), maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Errorf("%s: over %d lines; split it", l, maxFuncLines)
	}
}

// The scanner sees a long function and passes a short one.
func TestLongFuncsFindsALongFunction(t *testing.T) {
	dir := t.TempDir()
	body := "package x\n\nfunc short() {}\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	long, err := longFuncs(dir, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) != 1 || !strings.Contains(long[0], "long (62 lines)") {
		t.Fatalf("found %v, want only long at 62 lines", long)
	}
}

// longFuncs lists the non-test functions under root longer than limit
// lines, skipping vendored code and testdata.
func longFuncs(root string, limit int) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "vendor" || n == "testdata" || (strings.HasPrefix(n, ".") && n != "." && n != "..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > limit {
				out = append(out, fmt.Sprintf("%s: %s (%d lines)", path, fd.Name.Name, n))
			}
		}
		return nil
	})
	return out, err
}
