package router

import (
	"context"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/tracing"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// traced starts the request's trace from its traceparent (or a new one)
// before serving it; the trace rides in the request's context to both
// legs and into the journal row.
func (r *Router) traced(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		ctx, q := r.tracer.Start(req.Context(), req.Header)
		defer q.End()
		h(w, req.WithContext(ctx))
	}
}

// traceRow puts the call's trace id in its journal row and its outcome
// on the request span.
func (c *call) traceRow(row *journal.RequestRow) {
	if q := tracing.FromContext(c.req.Context()); q != nil {
		row.TraceID = journal.Ptr(q.TraceID())
		q.Outcome(row.Terminal)
	}
}

// leg opens a leg to engine iid: its traceparent rides in the returned
// context, and the engine's in-flight leg gauge counts it until done.
func (c *call) leg(ctx context.Context, phase, iid string, attempt int) (context.Context, func(failed bool)) {
	m := c.r.metrics
	m.LegStarted(iid, phase)
	end := func(bool) {}
	if q := tracing.FromContext(c.req.Context()); q != nil {
		ctx, end = q.Leg(ctx, phase, iid, attempt)
	}
	return ctx, func(failed bool) {
		end(failed)
		m.LegEnded(iid, phase)
	}
}

// tracedPrefillLeg is prefillLeg as one traced, counted leg.
func (c *call) tracedPrefillLeg(ctx context.Context, n int, iid string) (*vllm.Handoff, float64, *vllm.Error) {
	ctx, done := c.leg(ctx, "prefill", iid, n)
	h, start, e := c.prefillLeg(ctx, n, iid)
	done(e != nil)
	return h, start, e
}

// tracedDecodeLeg is decodeLeg as one traced, counted leg.
func (c *call) tracedDecodeLeg(ctx context.Context, n int, iid string, kvp []byte) *vllm.Error {
	ctx, done := c.leg(ctx, "decode", iid, n)
	e := c.decodeLeg(ctx, n, iid, kvp)
	done(e != nil)
	return e
}
