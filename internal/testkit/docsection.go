package testkit

import (
	"os"
	"strings"
	"testing"
)

// WriteDocSection replaces the text between "<!-- name:begin -->" and
// "<!-- name:end -->" in the document at path with body: the tables the
// corpus tests generate (make corpus-tables) live in docs between such
// markers. Missing markers are an error, so a table never lands in the
// wrong place.
func WriteDocSection(t testing.TB, path, name, body string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	s := string(raw)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: markers %s … %s missing", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + body + s[j:]
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
