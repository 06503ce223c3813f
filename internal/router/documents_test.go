package router

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// snake is a document key: lower-case words joined by underscores.
var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// TestDocumentKeysSnakeCase reads /narwhal/state and /narwhal/lifecycle
// and checks every object key is snake_case (map keys such as iids, which
// the harness names p0, d0, are lower-case too) and that both documents
// carry their schema and version, and that each decodes into its
// routerdoc type with no key left over.
func TestDocumentKeysSnakeCase(t *testing.T) {
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode}, nil)
	for path, schema := range map[string]string{"/narwhal/state": "narwhal.state", "/narwhal/lifecycle": "narwhal.lifecycle"} {
		body := get(t, h.srv.URL+path)
		var doc map[string]any
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc["schema"] != schema || doc["schema_version"] != float64(1) {
			t.Errorf("%s: schema %v version %v, want %s 1", path, doc["schema"], doc["schema_version"], schema)
		}
		checkSnake(t, path, doc)
		typed := map[string]any{"narwhal.state": &routerdoc.StateDoc{}, "narwhal.lifecycle": &routerdoc.LifecycleDoc{}}[schema]
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(typed); err != nil {
			t.Errorf("%s does not decode into its routerdoc type: %v", path, err)
		}
	}
}

func checkSnake(t *testing.T, at string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !snake.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", at, k)
			}
			checkSnake(t, at+"."+k, e)
		}
	case []any:
		for _, e := range x {
			checkSnake(t, at+"[]", e)
		}
	}
}
