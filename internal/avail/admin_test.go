package avail

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

type fixedStatus struct{ controls, ready bool }

func (s fixedStatus) ControlsFleet() bool { return s.controls }
func (s fixedStatus) Ready() bool         { return s.ready }

// The lifecycle routes answer through the router's Reply with the
// narwhal.lifecycle document; a drain of an unknown engine is a 409 that
// names it, and nothing leaves placement.
func TestLifecycleRoutesReplyWithTheDocument(t *testing.T) {
	fx := newFixture(t, 0, fakeProbes{})
	fx.s.status = fixedStatus{controls: true, ready: true}
	var status int
	var doc routerdoc.LifecycleDoc
	fx.s.reply = func(w http.ResponseWriter, st int, v any) {
		status = st
		b, _ := json.Marshal(v)
		_ = json.Unmarshal(b, &doc)
	}
	fx.s.ServeLifecycle(httptest.NewRecorder(), httptest.NewRequest("GET", "/narwhal/lifecycle", nil))
	if status != 200 || doc.Schema != routerdoc.LifecycleSchema || len(doc.Engines) != 3 || !doc.Engines["d0"].AcceptsNew || !doc.Router.Ready {
		t.Fatalf("GET lifecycle: %d %+v", status, doc)
	}
	req := httptest.NewRequest("POST", "/narwhal/lifecycle/drain", strings.NewReader(`{"iid":"x9"}`))
	fx.s.ServeDrain(httptest.NewRecorder(), req)
	if status != http.StatusConflict || !strings.Contains(doc.Error, "x9") {
		t.Errorf("drain of an unknown engine: %d %q", status, doc.Error)
	}
	if fx.s.LiveCount() != 3 {
		t.Errorf("LiveCount %d after a refused drain, want 3", fx.s.LiveCount())
	}
}
