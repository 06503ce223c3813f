package router

import (
	"context"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/tracing"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// traced serves h inside the request's trace (tracing.Tracer.Handler).
func (r *Router) traced(h http.HandlerFunc) http.HandlerFunc { return r.tracer.Handler(h) }

// traceRow puts the call's trace id in its journal row and its outcome
// on the request span.
func (c *call) traceRow(row *journal.RequestRow) {
	if id := tracing.Finish(c.ex.req.Context(), row.Terminal); id != "" {
		row.TraceID = journal.Ptr(id)
	}
}

// leg opens a leg to engine iid: its traceparent rides in the returned
// context, and the engine's in-flight leg gauge counts it until done.
func (c *call) leg(ctx context.Context, phase fault.Phase, iid string, attempt int) (context.Context, func(failed bool)) {
	c.r.metrics.LegStarted(iid, phase)
	ctx, end := tracing.Leg(c.ex.req.Context(), ctx, phase, iid, attempt)
	return ctx, func(failed bool) {
		end(failed)
		c.r.metrics.LegEnded(iid, phase)
	}
}

// tracedPrefillLeg is prefillLeg as one traced, counted leg.
func (c *call) tracedPrefillLeg(ctx context.Context, n int, iid string) (*vllm.Handoff, float64, error) {
	ctx, done := c.leg(ctx, fault.Prefill, iid, n)
	h, start, e := c.prefillLeg(ctx, n, iid)
	done(e != nil)
	return h, start, e
}

// tracedDecodeLeg is decodeLeg as one traced, counted leg.
func (c *call) tracedDecodeLeg(ctx context.Context, n int, iid string, kvp []byte) error {
	ctx, done := c.leg(ctx, fault.Decode, iid, n)
	e := c.decodeLeg(ctx, n, iid, kvp)
	done(e != nil)
	return e
}
