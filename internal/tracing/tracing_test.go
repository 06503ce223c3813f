package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/narwhal-go/narwhal/internal/vllm"
)

const (
	clientTP    = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
)

var traceparentShape = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$`)

// legHeader is the traceparent a leg's context would send to its engine.
func legHeader(t *testing.T, ctx context.Context) string {
	t.Helper()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		w.WriteHeader(500)
	}))
	defer srv.Close()
	c := vllm.NewClient(srv.URL, vllm.Options{})
	defer c.Close()
	c.Prefill(ctx, "/v1/completions", []byte(`{}`), "r")
	return <-got
}

// Without export the client's traceparent passes on unchanged and a
// request without one (or with a malformed one) gets a new trace.
func TestTraceparentWithoutExport(t *testing.T) {
	tr, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, header string
		same         bool
	}{
		{"client's trace continues", clientTP, true},
		{"none sent", "", false},
		{"malformed", "00-zz-00f067aa0ba902b7-01", false},
		{"all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("Traceparent", c.header)
		}
		_, q := tr.Start(context.Background(), h)
		ctx, done := q.Leg(context.Background(), "prefill", "p0", 1)
		got := legHeader(t, ctx)
		done(false)
		switch {
		case c.same && (got != clientTP || q.TraceID() != clientTrace):
			t.Errorf("%s: leg sent %q, trace id %s; want the client's %s", c.name, got, q.TraceID(), clientTP)
		case !c.same && (!traceparentShape.MatchString(got) || got[3:35] != q.TraceID() || q.TraceID() == clientTrace):
			t.Errorf("%s: leg sent %q with trace id %s; want a new valid trace", c.name, got, q.TraceID())
		}
	}
}

// With an exporter the router records request, admission, prefill,
// kv_handoff and decode spans in the client's trace, and each leg's
// traceparent names its own span.
func TestSpansExported(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := New(Options{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Traceparent": {clientTP}}
	ctx, q := tr.Start(context.Background(), h)
	if FromContext(ctx) != q {
		t.Fatal("FromContext lost the request")
	}
	pctx, pdone := q.Leg(ctx, "prefill", "p0", 1)
	prefillTP := legHeader(t, pctx)
	pdone(false)
	dctx, ddone := q.Leg(ctx, "decode", "d0", 1)
	decodeTP := legHeader(t, dctx)
	ddone(true)
	q.Outcome("failed")
	q.End()
	spans := exp.GetSpans()
	names := map[string]string{}
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != clientTrace {
			t.Errorf("span %s in trace %s, want the client's %s", s.Name, s.SpanContext.TraceID(), clientTrace)
		}
		names[s.Name] = s.SpanContext.SpanID().String()
		if s.Name == "narwhal.request" && s.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("request span's parent %s, want the client's span", s.Parent.SpanID())
		}
	}
	var got []string
	for n := range names {
		got = append(got, n)
	}
	sort.Strings(got)
	want := []string{"narwhal.admission", "narwhal.decode", "narwhal.kv_handoff", "narwhal.prefill", "narwhal.request"}
	if len(got) != len(want) || got[0] != want[0] || got[4] != want[4] {
		t.Fatalf("spans %v, want %v", got, want)
	}
	if prefillTP != "00-"+clientTrace+"-"+names["narwhal.prefill"]+"-01" ||
		decodeTP != "00-"+clientTrace+"-"+names["narwhal.decode"]+"-01" {
		t.Errorf("legs sent %s and %s; want their own spans %v", prefillTP, decodeTP, names)
	}
}

// The OTLP/HTTP exporter delivers the spans to a collector: here an
// in-process receiver decoding the protobuf export requests.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	traces := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad export", 400)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					traces[string(s.Name)]++
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	defer srv.Close()
	tr, err := New(Options{Endpoint: srv.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	_, q := tr.Start(context.Background(), http.Header{})
	_, done := q.Leg(context.Background(), "prefill", "p0", 1)
	done(false)
	q.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("flush to the receiver: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if traces["narwhal.request"] != 1 || traces["narwhal.prefill"] != 1 || traces["narwhal.admission"] != 1 {
		t.Errorf("receiver got spans %v, want request, admission and prefill", traces)
	}
}

// Handler puts the request's trace in its context (a nil Tracer too:
// traceparent still passes on); Finish returns its id, and Leg without a
// trace leaves the context as it was.
func TestHandlerFinishLeg(t *testing.T) {
	withoutExport, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]*Tracer{"nil tracer": nil, "tracer without export": withoutExport} {
		var id, sent string
		h := tr.Handler(func(_ http.ResponseWriter, req *http.Request) {
			ctx, done := Leg(req.Context(), context.Background(), "prefill", "p0", 1)
			sent = legHeader(t, ctx)
			done(false)
			id = Finish(req.Context(), "completed")
		})
		req := httptest.NewRequest("POST", "/v1/completions", nil)
		req.Header.Set("Traceparent", clientTP)
		h(httptest.NewRecorder(), req)
		if id != clientTrace || sent != clientTP {
			t.Errorf("%s: trace id %q, leg sent %q; want the client's %s", name, id, sent, clientTP)
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
