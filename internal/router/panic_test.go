package router

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// panicOnce is a ResponseWriter whose first write of the status or body
// panics, as a bug on the response path would.
type panicOnce struct {
	*httptest.ResponseRecorder
	done bool
}

func (p *panicOnce) trip() {
	if !p.done {
		p.done = true
		panic("injected fault on the response path")
	}
}

func (p *panicOnce) WriteHeader(code int) { p.trip(); p.ResponseRecorder.WriteHeader(code) }

func (p *panicOnce) Write(b []byte) (int, error) { p.trip(); return p.ResponseRecorder.Write(b) }

// A panic while serving a request becomes a 500 in OpenAI's error shape
// and the request's one journal row (failed, internal); the router serves
// the next request as before.
func TestPanicWhileServingIsA500AndOneJournalRow(t *testing.T) {
	h := newHarness(t, ppdd, nil)
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": "the quick brown fox jumps over", "max_tokens": 4})
	req := httptest.NewRequestWithContext(ctx(t), http.MethodPost, "/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := &panicOnce{ResponseRecorder: httptest.NewRecorder()}
	h.router.ServeHTTP(w, req)
	resp := w.Result()
	h.noteRID(resp)
	var e struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); resp.StatusCode != 500 || err != nil || !strings.Contains(e.Error.Message, "internal error") {
		t.Fatalf("after a panic: %d %s; want a 500 with an OpenAI-shaped internal error", resp.StatusCode, w.Body.Bytes())
	}
	row := h.row(resp.Header.Get("X-Narwhal-Request-Id"))
	if row.Terminal != journal.TerminalFailed || row.Reason == nil || *row.Reason != string(fault.Internal) {
		t.Errorf("journal row %s/%v, want failed/internal", row.Terminal, row.Reason)
	}
	if r, out := h.post(ctx(t), "/v1/completions", map[string]any{"model": model, "prompt": "again", "max_tokens": 4}); r.StatusCode != 200 {
		t.Fatalf("the next request after a panic: %d %s", r.StatusCode, out)
	}
}
