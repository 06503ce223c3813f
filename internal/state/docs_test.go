package state

import (
	"os"
	"strings"
	"testing"
)

// The example in docs/state.md is a valid document, so the docs cannot
// drift from the schema unnoticed.
func TestDocsExampleDecodes(t *testing.T) {
	b, err := os.ReadFile("../../docs/state.md")
	if err != nil {
		t.Skipf("docs/state.md: %v", err)
	}
	_, rest, ok := strings.Cut(string(b), "```json\n")
	if !ok {
		t.Fatal("docs/state.md has no json example")
	}
	example, _, _ := strings.Cut(rest, "```")
	h, err := Decode([]byte(example))
	if err != nil {
		t.Fatalf("docs example: %v", err)
	}
	if err := ResumeCheck(h, []string{"e0", "e1", "e2"}, PolicyIndividual, true); err != nil {
		t.Fatalf("docs example does not resume: %v", err)
	}
}
