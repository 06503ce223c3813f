package ports

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// deterministicPackages are the packages (under internal/, with their
// subpackages) that call their results deterministic (ADR-006, INV-42).
// Add a package here when it makes that claim; one that does not exist yet
// is skipped, every one that exists is checked.
var deterministicPackages = []string{
	"sched",
	"sim",
	"calc",
	"diagnose",
	"evidence",
	"evidence/execfp",
	"evidence/memory", // covered by "evidence" too; named because the calculator claims byte-identical predictions
	"canon",
	"enginemodel", // the step-loop timing simengine and sim share: same inputs, same durations
	"lifecycle",   // availability decisions: time comes in as an argument or through a ports.Clock
	"vllmlog",     // the log reader diagnose and memory observations build their deterministic results on
}

// forbiddenImports give ambient randomness or identifiers; a deterministic
// package takes an Rng or IDGenerator port instead.
var forbiddenImports = map[string]string{
	"math/rand":                 "take a ports.Rng",
	"math/rand/v2":              "take a ports.Rng",
	"crypto/rand":               "take a ports.Rng or ports.IDGenerator",
	"github.com/google/uuid":    "take a ports.IDGenerator",
	"github.com/gofrs/uuid":     "take a ports.IDGenerator",
	"github.com/gofrs/uuid/v5":  "take a ports.IDGenerator",
	"github.com/satori/go.uuid": "take a ports.IDGenerator",
	"github.com/oklog/ulid":     "take a ports.IDGenerator",
	"github.com/oklog/ulid/v2":  "take a ports.IDGenerator",
	"github.com/rs/xid":         "take a ports.IDGenerator",
}

// forbiddenCalls read the wall clock, wait on it, or read the process
// environment.
var forbiddenCalls = map[string]map[string]string{
	"time": {
		"Now": "take a ports.Clock", "Since": "take a ports.Clock", "Until": "take a ports.Clock",
		"Sleep": "take a ports.Clock", "After": "take a ports.Clock", "AfterFunc": "take a ports.Clock",
		"Tick": "take a ports.Clock", "NewTimer": "take a ports.Clock", "NewTicker": "take a ports.Clock",
	},
	"os": {
		"Getenv": "pass the value in", "LookupEnv": "pass the value in", "Environ": "pass the value in",
		"Hostname": "pass the value in", "Getpid": "pass the value in",
	},
}

func TestDeterministicPackagesForbiddenCalls(t *testing.T) {
	for _, pkg := range deterministicPackages {
		t.Run(pkg, func(t *testing.T) {
			dir := filepath.Join("..", pkg)
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				t.Skipf("internal/%s does not exist yet", pkg)
			}
			findings, files, err := scanTree(dir)
			if err != nil {
				t.Fatal(err)
			}
			if files == 0 {
				t.Skipf("internal/%s has no Go files yet", pkg)
			}
			for _, f := range findings {
				t.Errorf("%s", f)
			}
		})
	}
}

// TestBoundaryScannerFindsViolations proves the scanner is not blind: a
// fixture with one of each violation must be reported in full, and a clean
// fixture (same names used legitimately) must not be.
func TestBoundaryScannerFindsViolations(t *testing.T) {
	bad, _, err := scanTree("testdata/boundary/bad")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`import "crypto/rand"`, `import "github.com/google/uuid"`, `import "math/rand/v2"`,
		"os.Getenv", "os.LookupEnv", "time.After", "time.Now", "time.Since", "time.Sleep",
	}
	var got []string
	for _, f := range bad {
		got = append(got, f.what)
	}
	sort.Strings(got)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("scanner found\n %v\nwant\n %v", got, want)
	}
	good, files, err := scanTree("testdata/boundary/good")
	if err != nil || files == 0 || len(good) != 0 {
		t.Fatalf("clean fixture: files=%d findings=%v err=%v", files, good, err)
	}
}

type finding struct {
	pos  token.Position
	what string
	fix  string
}

func (f finding) String() string {
	return fmt.Sprintf("%s: %s breaks the determinism boundary (ADR-006 INV-42); %s", f.pos, f.what, f.fix)
}

// scanTree parses every non-test Go file under dir (testdata excluded, as
// the go tool does) and reports forbidden imports and calls.
func scanTree(dir string) ([]finding, int, error) {
	var out []finding
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		found, err := scanFile(path)
		out = append(out, found...)
		return err
	})
	return out, files, err
}

func scanFile(path string) ([]finding, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []finding
	local := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if fix, bad := forbiddenImports[p]; bad {
			out = append(out, finding{fset.Position(imp.Pos()), `import "` + p + `"`, fix})
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if fix, bad := forbiddenCalls[local[id.Name]][sel.Sel.Name]; bad {
			out = append(out, finding{fset.Position(sel.Pos()), local[id.Name] + "." + sel.Sel.Name, fix})
		}
		return true
	})
	return out, nil
}
