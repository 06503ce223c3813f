package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
)

// testOpts are deterministic: fixed clock, seeded run bits, fixed source.
func testOpts(seed uint64) Options {
	return Options{
		Version: "v0.0.0-test",
		Source:  "sha256:" + strings.Repeat("ab", 32),
		Clock:   ports.NewFake(time.Unix(1790000000, 0)),
		Rng:     ports.NewSeededRng(seed),
	}
}

func openTemp(t *testing.T, seed uint64) (*Writer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs", "deep", "journal.jsonl")
	w, err := Open(path, testOpts(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, path
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end in a newline", path)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// completed is a minimal valid completed row.
func completed(rid string) *RequestRow {
	return &RequestRow{RID: rid, Terminal: TerminalCompleted, InputSized: true, InputLen: 10}
}

// named gives a reader a file name without a file.
type named struct {
	*strings.Reader
	name string
}

func (n named) Name() string { return n.name }
