package router

import (
	"context"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// Failover: a leg whose engine could not be reached at all (a connect
// error: refused, unroutable, connect timeout) never started any work, so
// no KV moved and no output exists. It moves to another engine of the
// role within the same attempt, whatever serving.max_attempts says, at no
// retry credit. A leg that reached its engine and failed is retried only
// as a whole new attempt (serving.max_attempts > 1), because a decode
// engine that received a handoff may already have consumed it.

// Re-placement: an engine that answered 5xx, or cut the connection, before
// any output reached the client failed this leg only; another engine may
// well serve it. The router places it again itself, once per leg and only
// while the TTFT budget is not spent — a prefill leg on another prefill
// engine within the attempt, a decode leg as a new attempt with a fresh
// prefill (the failed consumer may have consumed the handoff) — and then
// answers with x-should-retry: false, so an SDK does not multiply the
// load by retrying what the router already retried.

// replaceable reports whether e, a leg's failure before any output, may
// be placed again on another engine.
func replaceable(e *fault.Error) bool {
	return e != nil && (e.Status >= 500 || e.Reason == fault.EngineConnection)
}

// replace records a failed leg on iid that the router places again itself
// and excludes iid for the rest of the call; false when it may not: the
// leg already moved once, output started, the client left, or the TTFT
// budget is spent.
func (c *call) replace(ctx context.Context, n int, phase fault.Phase, e *fault.Error, exclude map[string]bool, iid string) bool {
	r := c.r
	budget := r.cfg.SLO.TTFT * (1 + r.cfg.Serving.AdmissionMargin)
	if ctx.Err() != nil || c.ex.clientGone || c.ex.committed || c.att.replaced[phase] || !replaceable(e) || r.now()-c.adm.arrived >= budget {
		return false
	}
	if c.att.replaced == nil {
		c.att.replaced = map[fault.Phase]bool{}
	}
	c.att.replaced[phase] = true
	r.attemptFailed(phase, e.Reason)
	exclude[iid] = true
	c.recordFailure(n, phase, e, 0, journal.RetryReplaced)
	c.att.failedOver = true // a re-placement is not a new admission: no TTFT check
	return true
}

// neverReached reports whether e is a failure to connect to the engine.
func neverReached(e *fault.Error) bool { return e != nil && e.Reason == fault.EngineUnreachable }

// failover records a failed leg on iid that may move to another engine and
// excludes iid for the rest of the call; false when it may not.
func (c *call) failover(ctx context.Context, n int, phase fault.Phase, e *fault.Error, exclude map[string]bool, iid string) bool {
	if ctx.Err() != nil || c.ex.clientGone || c.ex.committed || !neverReached(e) {
		return false
	}
	c.r.attemptFailed(phase, e.Reason)
	exclude[iid] = true
	c.recordFailure(n, phase, e, 0, journal.RetryFailover)
	c.att.failedOver = true // a re-placement is not a new admission: no TTFT check
	return true
}
