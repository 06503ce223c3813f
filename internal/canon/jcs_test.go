package canon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJCSOfficialVectors runs every official RFC 8785 input/output pair.
func TestJCSOfficialVectors(t *testing.T) {
	inputs, err := filepath.Glob("testdata/jcs/input/*.json")
	if err != nil || len(inputs) < 10 {
		t.Fatalf("want the 10 vendored JCS inputs, found %d (%v)", len(inputs), err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			src := mustRead(t, in)
			want := mustRead(t, filepath.Join("testdata/jcs/output", name))
			got, err := Canonicalize(src)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != string(want) {
				t.Fatalf("canonical form differs\n got: %q\nwant: %q", got, want)
			}
			if err := VerifyCanonical(want); err != nil {
				t.Fatalf("official output refused: %v", err)
			}
			if string(src) != string(want) && VerifyCanonical(src) == nil {
				t.Fatalf("non-canonical input accepted as canonical")
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
