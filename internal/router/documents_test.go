package router

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// snake is a document key: lower-case words joined by underscores.
var snake = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// TestDocumentKeysSnakeCase reads /narwhal/state and /narwhal/lifecycle
// and checks every object key is snake_case (map keys such as iids, which
// the harness names p0, d0, are lower-case too) and that both documents
// carry their schema and version.
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

// TestLifecycleEventJSON: an event's fields sit beside at and action, and
// the writer's choice not to escape HTML reaches inside the row (an error
// message with "<" stays readable, as when the rows were maps).
func TestLifecycleEventJSON(t *testing.T) {
	tests := []struct {
		name string
		ev   LifecycleEvent
		want string
	}{
		{"no fields", LifecycleEvent{At: 1.5, Action: "drain_started"}, `{"events":[{"action":"drain_started","at":1.5}]}`},
		{"flat fields", LifecycleEvent{At: 2, Action: "drain_blocked", Fields: map[string]any{"iid": "d0", "error": "a <b> & c"}},
			`{"events":[{"action":"drain_blocked","at":2,"error":"a <b> & c","iid":"d0"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeJSON(rec, 200, struct {
				Events []LifecycleEvent `json:"events"`
			}{[]LifecycleEvent{tc.ev}})
			if got := strings.TrimSpace(rec.Body.String()); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
