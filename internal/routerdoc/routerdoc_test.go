package routerdoc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestLifecycleEventJSON: an event's fields sit beside at and action, the
// writer's choice not to escape HTML reaches inside the row (an error
// message with "<" stays readable, as when the rows were maps), and a row
// decodes back into the same event.
func TestLifecycleEventJSON(t *testing.T) {
	tests := []struct {
		name string
		ev   LifecycleEvent
		want string
	}{
		{"no fields", LifecycleEvent{At: 1.5, Action: "drain_started", Fields: map[string]any{}},
			`{"events":[{"action":"drain_started","at":1.5}]}`},
		{"flat fields", LifecycleEvent{At: 2, Action: "drain_blocked", Fields: map[string]any{"iid": "d0", "error": "a <b> & c"}},
			`{"events":[{"action":"drain_blocked","at":2,"error":"a <b> & c","iid":"d0"}]}`},
	}
	type doc struct {
		Events []LifecycleEvent `json:"events"`
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(doc{[]LifecycleEvent{tc.ev}}); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(b.String()); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
			var back doc
			if err := json.Unmarshal(b.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Events, []LifecycleEvent{tc.ev}) {
				t.Errorf("decoded %+v, want %+v", back.Events, tc.ev)
			}
		})
	}
}
