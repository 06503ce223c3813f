package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Handler puts the request's trace in its context (a nil Tracer too:
// traceparent still passes on); Finish returns its id, and Leg without a
// trace leaves the context as it was.
func TestHandlerFinishLeg(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   *Tracer
	}{{"nil tracer", nil}, {"tracer without export", mustNew(t)}} {
		var id, sent string
		h := tc.tr.Handler(func(_ http.ResponseWriter, req *http.Request) {
			ctx, done := Leg(req.Context(), context.Background(), "prefill", "p0", 1)
			sent = legHeader(t, ctx)
			done(false)
			id = Finish(req.Context(), "completed")
		})
		req := httptest.NewRequest("POST", "/v1/completions", nil)
		req.Header.Set("Traceparent", clientTP)
		h(httptest.NewRecorder(), req)
		if id != clientTrace || sent != clientTP {
			t.Errorf("%s: trace id %q, leg sent %q; want the client's %s", tc.name, id, sent, clientTP)
		}
	}
	if id := Finish(context.Background(), "completed"); id != "" {
		t.Errorf("Finish without a trace = %q, want \"\"", id)
	}
	bare := context.WithValue(context.Background(), requestKey{}, "not a request")
	ctx, done := Leg(context.Background(), bare, "decode", "d0", 1)
	done(true)
	if ctx != bare {
		t.Error("Leg without a trace replaced the context")
	}
}

func mustNew(t *testing.T) *Tracer {
	t.Helper()
	tr, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
