// Package tracing carries W3C Trace Context through the router: a
// request's traceparent is accepted from the client (or a trace is
// started), both legs send one to their engine (vLLM started with
// --otlp-traces-endpoint parents its spans on it), and the trace id lands
// in the request's journal row. With an OTLP endpoint configured the
// router also records its own spans — the request, admission, each
// prefill leg, the KV handoff and each decode leg — through the
// OpenTelemetry SDK; without one (the default) nothing is recorded and the
// client's traceparent is passed on unchanged.
package tracing

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Options configure span export.
type Options struct {
	// Endpoint is an OTLP/HTTP traces URL, e.g.
	// http://127.0.0.1:4318/v1/traces; "" records no spans.
	Endpoint string
	// Exporter receives the spans instead of Endpoint (tests use the SDK's
	// in-memory exporter); it is flushed synchronously.
	Exporter sdktrace.SpanExporter
	// Service is the service.name resource attribute; default narwhal-router.
	Service string
}

// Tracer starts request traces. The zero value and nil are usable and
// record nothing.
type Tracer struct {
	tp *sdktrace.TracerProvider // nil when spans are not recorded
	tr trace.Tracer
}

var w3c = propagation.TraceContext{}

// New returns a Tracer exporting as o says; with neither Endpoint nor
// Exporter it records nothing and costs one header parse per request.
func New(o Options) (*Tracer, error) {
	exp := o.Exporter
	var sp sdktrace.SpanProcessor
	switch {
	case exp != nil:
		sp = sdktrace.NewSimpleSpanProcessor(exp)
	case o.Endpoint != "":
		e, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(o.Endpoint))
		if err != nil {
			return nil, fmt.Errorf("OTLP traces endpoint %q: %w (give a URL like http://collector:4318/v1/traces)", o.Endpoint, err)
		}
		sp = sdktrace.NewBatchSpanProcessor(e)
	default:
		return &Tracer{}, nil
	}
	if o.Service == "" {
		o.Service = "narwhal-router"
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(o.Service))))
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/narwhal-go/narwhal/internal/router")}, nil
}

// Recording says whether spans are exported.
func (t *Tracer) Recording() bool { return t != nil && t.tp != nil }

// Shutdown flushes and stops span export.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.Recording() {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

type requestKey struct{}

// Request is one original request's trace. Its methods are called from
// the request's own goroutine, one leg after the other.
type Request struct {
	t       *Tracer
	sc      trace.SpanContext // the client's span, or the one started here
	root    trace.Span        // recorded request span; nil when not recording
	ctx     context.Context   // carries root, parent of the phase spans
	arrived time.Time
	legs    int       // prefill legs started
	kvReady time.Time // end of the last successful prefill leg
}

// Start begins a request's trace from its headers: a valid traceparent
// continues the client's trace, anything else starts a new one. The
// returned context carries the Request (FromContext).
func (t *Tracer) Start(ctx context.Context, h http.Header) (context.Context, *Request) {
	q := &Request{t: t, arrived: time.Now()}
	remote := trace.SpanContextFromContext(w3c.Extract(ctx, propagation.HeaderCarrier(h)))
	if t.Recording() {
		pctx := ctx
		if remote.IsValid() {
			pctx = trace.ContextWithRemoteSpanContext(ctx, remote)
		}
		q.ctx, q.root = t.tr.Start(pctx, "narwhal.request", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithTimestamp(q.arrived))
		q.sc = q.root.SpanContext()
	} else if q.sc = remote; !remote.IsValid() {
		q.sc = newRoot()
	}
	return context.WithValue(ctx, requestKey{}, q), q
}

// newRoot is a fresh, unsampled span context: a trace id for the journal
// and the engines when the client sent none and nothing records here.
func newRoot() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
}

// FromContext is the Request Start put in ctx, or nil.
func FromContext(ctx context.Context) *Request {
	q, _ := ctx.Value(requestKey{}).(*Request)
	return q
}

// TraceID is the trace's id in 32 lowercase hex digits.
func (q *Request) TraceID() string { return q.sc.TraceID().String() }

// Outcome records the request's terminal outcome on its span.
func (q *Request) Outcome(terminal string) {
	if q.root != nil {
		q.root.SetAttributes(attribute.String("narwhal.terminal", terminal))
	}
}

// End closes the request span.
func (q *Request) End() {
	if q.root != nil {
		q.root.End()
	}
}

// Leg starts a prefill or decode leg to engine iid: the returned context
// sends the leg's traceparent, and done ends the leg's span (with an error
// status when failed). The first prefill leg closes the admission span; a
// decode leg after a prefill records the KV handoff between them.
func (q *Request) Leg(ctx context.Context, phase fault.Phase, iid string, attempt int) (context.Context, func(failed bool)) {
	if q.root == nil {
		return vllm.WithTraceparent(ctx, traceparent(q.sc)), func(bool) {}
	}
	now := time.Now()
	switch {
	case phase == fault.Prefill && q.legs == 0:
		q.span("narwhal.admission", q.arrived, now)
	case phase == fault.Decode && !q.kvReady.IsZero():
		q.span("narwhal.kv_handoff", q.kvReady, now)
	}
	if phase == fault.Prefill {
		q.legs++
	}
	_, leg := q.t.tr.Start(q.ctx, "narwhal."+string(phase), trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(now),
		trace.WithAttributes(attribute.String("narwhal.iid", iid), attribute.Int("narwhal.attempt", attempt)))
	return vllm.WithTraceparent(ctx, traceparent(leg.SpanContext())), func(failed bool) {
		end := time.Now()
		if failed {
			leg.SetStatus(codes.Error, string(phase)+" leg failed")
		} else if phase == fault.Prefill {
			q.kvReady = end
		}
		leg.End(trace.WithTimestamp(end))
	}
}

// span records a finished child of the request span.
func (q *Request) span(name string, start, end time.Time) {
	_, s := q.t.tr.Start(q.ctx, name, trace.WithTimestamp(start))
	s.End(trace.WithTimestamp(end))
}

// traceparent formats sc as a W3C traceparent header value.
func traceparent(sc trace.SpanContext) string {
	h := http.Header{}
	w3c.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.HeaderCarrier(h))
	return h.Get("Traceparent")
}

// Handler starts each request's trace from its traceparent (or a new one)
// before serving it: the trace rides in the request's context to both legs
// and into the journal row, and its span ends when h returns.
func (t *Tracer) Handler(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		ctx, q := t.Start(req.Context(), req.Header)
		defer q.End()
		h(w, req.WithContext(ctx))
	}
}

// Finish records terminal on the trace ctx carries and returns its trace
// id; "" when ctx carries none.
func Finish(ctx context.Context, terminal string) string {
	q := FromContext(ctx)
	if q == nil {
		return ""
	}
	q.Outcome(terminal)
	return q.TraceID()
}

// Leg is Request.Leg for the request reqCtx carries; without one it
// sends no traceparent and done does nothing.
func Leg(reqCtx, ctx context.Context, phase fault.Phase, iid string, attempt int) (context.Context, func(failed bool)) {
	if q := FromContext(reqCtx); q != nil {
		return q.Leg(ctx, phase, iid, attempt)
	}
	return ctx, func(bool) {}
}
