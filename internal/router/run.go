package router

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/avail"
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// run serves the call's attempts: each a fresh prefill, handoff and decode,
// until one completes or the call cannot continue.
func (c *call) run(ctx context.Context) {
	exclude := map[string]bool{}
	for attempt := 1; ; attempt++ {
		c.att.n = attempt
		if !c.attempt(ctx, attempt, exclude) {
			return
		}
	}
}

// attempt runs one prefill+decode attempt. It returns true when another
// attempt should follow.
func (c *call) attempt(ctx context.Context, n int, exclude map[string]bool) bool {
	p, h, start, retry, ok := c.prefillPhase(ctx, n, exclude)
	if !ok {
		return retry
	}
	r := c.r
	r.av.LegSucceeded(p, string(fault.Prefill))
	// TTFT is the attempt that serves the request: arrival to its
	// producer's completion.
	c.facts.prefilledAt = r.now()
	c.facts.ttft = c.facts.prefilledAt - c.adm.arrived
	return c.decodePhase(ctx, n, exclude, p, h, start)
}

// prefillPhase places and runs the prefill leg, moving to another engine
// when the leg never reached its engine. ok is false when the attempt
// ended; retry then says whether another attempt follows.
func (c *call) prefillPhase(ctx context.Context, n int, exclude map[string]bool) (p string, h *vllm.Handoff, start float64, retry, ok bool) {
	r := c.r
	for {
		if p, ok = c.placePrefill(ctx, n, exclude); !ok {
			return "", nil, 0, false, false
		}
		c.phase, c.att.prefillIID = fault.Prefill, p
		h, start, err := c.tracedPrefillLeg(ctx, n, p)
		if err == nil {
			return p, h, start, false, true
		}
		e := fault.Of(err, fault.Prefill)
		if ctx.Err() == nil {
			r.reportLeg(avail.Failure{IID: p, Err: e})
		}
		if !c.failover(ctx, n, fault.Prefill, e, exclude, p) && !c.replace(ctx, n, fault.Prefill, e, exclude, p) {
			return "", nil, 0, c.legFailed(ctx, n, fault.Prefill, e, exclude, p), false
		}
	}
}

// decodePhase places and runs the decode leg on producer p's handoff h
// (its prefill leg started at start), moving to another engine when the
// leg never reached its engine. It returns true when another attempt
// should follow.
func (c *call) decodePhase(ctx context.Context, n int, exclude map[string]bool, p string, h *vllm.Handoff, start float64) bool {
	r := c.r
	for {
		if bound := r.cfg.Serving.HandoffTimeoutS; bound > 0 && r.now()-start > bound {
			e := &fault.Error{Phase: fault.Decode, Reason: fault.EngineTimeout, Timeout: true, Class: fault.ClassKVHandoff,
				Msg: "KV handoff expired before decode dispatch"}
			return c.handoffExpired(ctx, n, e, exclude, p)
		}
		d, expired, ok := c.placeDecode(ctx, exclude, start)
		if expired != nil {
			return c.handoffExpired(ctx, n, fault.Of(expired, fault.Decode), exclude, p)
		}
		if !ok {
			return false
		}
		c.phase, c.att.decodeIID = fault.Decode, d
		crossed := d != p
		c.att.crossed = &crossed
		kvp := h.Params
		if !crossed {
			kvp = nil // same engine: reuse its own cache, no transfer
		}
		err := c.tracedDecodeLeg(ctx, n, d, kvp)
		if err == nil {
			r.av.LegSucceeded(d, string(fault.Decode))
			c.complete()
			return false
		}
		e := fault.Of(err, fault.Decode)
		switch {
		case ctx.Err() != nil || c.ex.clientGone: // the client's doing, not the engine's
		default:
			r.reportLeg(avail.Failure{IID: d, Err: e, Peer: p, Tokens: c.facts.tokens})
		}
		if c.ex.committed {
			c.outputFailed(ctx, e)
			return false
		}
		if c.failover(ctx, n, fault.Decode, e, exclude, d) {
			continue
		}
		if c.replace(ctx, n, fault.Decode, e, exclude, d) {
			c.att.clearEngines()
			return true // a new attempt: fresh prefill, another consumer
		}
		return c.legFailed(ctx, n, fault.Decode, e, exclude, d, p)
	}
}

// placePrefill takes the core's prefill step (sched.Core.Place: the TTFT
// check on the first admission only, the decode check on every attempt,
// dispatch). A request the core puts in its deadline queue waits there
// (queue.go); without the queue a request that finds every seat taken
// waits within serving.queue_timeout_s.
func (c *call) placePrefill(ctx context.Context, n int, exclude map[string]bool) (string, bool) {
	for {
		iid, wait, ok := c.tryPrefill(n, exclude)
		if wait == nil {
			return iid, ok
		}
		if wait.Deadline > 0 {
			return c.awaitQueue(ctx, n, exclude, wait.Deadline)
		}
		left := units.Seconds(c.r.cfg.Serving.QueueTimeoutS - c.facts.queueWaits.Admission - c.facts.queueWaits.Prefill)
		start := c.r.now()
		freed := c.waitSeat(ctx, wait.freed, left)
		c.facts.queueWaits.Prefill += c.r.now() - start
		switch {
		case ctx.Err() != nil:
			c.ended(ctx)
			return "", false
		case !freed:
			c.refused(prefillLeg(n), &sched.Refusal{Cause: sched.CauseSeats}, sched.Placement{}) // the wait ran out
			return "", false
		}
	}
}

// prefillWait is a prefill step that must wait: freed closes when a seat
// frees; Deadline is the core's deadline-queue bound (0: a seat wait
// without the queue).
type prefillWait struct {
	freed    <-chan struct{}
	Deadline float64
}

// waitSeat waits up to d for the seat channel to signal; false when the
// time ran out or ctx ended.
func (c *call) waitSeat(ctx context.Context, seat <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	t := c.r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-seat:
		return true
	case <-t.C():
	case <-ctx.Done():
	}
	return false
}

// tryPrefill takes the prefill step once. wait is non-nil when the step
// must wait: in the deadline queue (the call is then registered as a
// waiter, under the same lock, so no freed room can be missed), or for a
// seat.
func (c *call) tryPrefill(n int, exclude map[string]bool) (string, *prefillWait, bool) {
	var pl sched.Placement
	var ref *sched.Refusal
	var freed chan struct{}
	ev, recheck := c.cacheEvidence() // outside r.mu: it reads the residency views
	c.r.locked(func() {
		if recheck {
			c.r.core.SetCacheEvidence(c.rid, ev)
		}
		pl, ref, freed = c.placeLocked(n, exclude)
		if ref != nil && ref.Wait && ref.Deadline > 0 {
			c.phase = fault.Queue
			c.r.waitLocked(c, n, exclude)
		}
	})
	switch {
	case ref != nil && ref.Wait:
		return "", &prefillWait{freed: freed, Deadline: ref.Deadline}, false
	case ref != nil:
		c.refused(prefillLeg(n), ref, pl)
		return "", nil, false
	}
	return pl.IID, nil, true
}

// placeLocked takes the prefill step for attempt n and prices the
// placement for the journal; a dispatch counts the attempt and spends the
// retry credit the call reserved. freed signals the next freed seat.
func (c *call) placeLocked(n int, exclude map[string]bool) (sched.Placement, *sched.Refusal, chan struct{}) {
	r := c.r
	now := r.now()
	pl, ref := r.core.Place(now, c.rid, exclude, sched.Attempt{N: n, FailedOver: c.att.failedOver})
	if ref == nil {
		c.placedCache(pl)
	}
	if pl.IID != "" {
		c.facts.price = &journal.Price{PriceS: now - c.adm.arrived + pl.Cost.Secondary, ElapsedS: now - c.adm.arrived,
			BacklogS: pl.Cost.Secondary - pl.OwnPrefill, OwnPrefillS: pl.OwnPrefill}
		if math.IsInf(c.facts.price.PriceS, 0) {
			c.facts.price = nil
		}
	}
	if ref == nil {
		r.stats.PrefillAttempts++
		r.metrics.PrefillAttempts.Inc()
		if c.att.reserved {
			r.stats.Retries++
			r.stats.CreditsSpent++
			r.metrics.RetryAttempts.Inc()
			r.metrics.RetryCreditsSpent.Inc()
			c.att.reserved = false
		}
	}
	return pl, ref, r.freed
}

// prefillLeg is which prefill step attempt n's refusal came from.
func prefillLeg(n int) openai.RefusalLeg {
	if n == 1 {
		return openai.FirstPrefill
	}
	return openai.RetryPrefill
}

// placeDecode takes the core's decode step (sched.Core.PlaceDecode),
// waiting for a decode seat while the KV handoff is young enough
// (handoffStart is when the prefill leg started). expired is the handoff
// error when it is not.
func (c *call) placeDecode(ctx context.Context, exclude map[string]bool, handoffStart float64) (iid string, expired error, ok bool) {
	r := c.r
	for {
		var pl sched.Placement
		var ref *sched.Refusal
		var freed chan struct{}
		r.locked(func() { pl, ref, freed = c.placeDecodeLocked(exclude) })
		switch {
		case ref == nil:
			return pl.IID, nil, true
		case !ref.Wait:
			c.refused(openai.DecodeLeg, ref, pl)
			return "", nil, false
		}
		left := c.adm.deadline.Sub(r.clock.Now())
		if b := r.cfg.Serving.HandoffTimeoutS; b > 0 {
			left = min(left, units.Seconds(b-(r.now()-handoffStart)))
		}
		start := r.now()
		freed2 := c.waitSeat(ctx, freed, left)
		c.facts.queueWaits.Decode += r.now() - start
		if ctx.Err() != nil {
			c.ended(ctx)
			return "", nil, false
		}
		if !freed2 {
			return "", &fault.Error{Phase: fault.Decode, Reason: fault.EngineTimeout, Timeout: true, Class: fault.ClassKVHandoff,
				Msg: "KV handoff bound reached while waiting for a decode seat"}, false
		}
	}
}

// placeDecodeLocked takes the decode step; a dispatch counts the attempt.
// freed signals the next freed seat.
func (c *call) placeDecodeLocked(exclude map[string]bool) (sched.Placement, *sched.Refusal, chan struct{}) {
	r := c.r
	pl, ref := r.core.PlaceDecode(r.now(), c.rid, exclude)
	if ref == nil {
		r.stats.DecodeAttempts++
		r.metrics.DecodeAttempts.Inc()
	}
	return pl, ref, r.freed
}

// prefillLeg runs the producer leg and returns the handoff and the time
// the leg started (the handoff's age counts from there).
func (c *call) prefillLeg(ctx context.Context, n int, iid string) (*vllm.Handoff, float64, error) {
	r := c.r
	start := r.now()
	lctx, cancel := context.WithTimeout(ctx, units.Seconds(r.cfg.Serving.PrefillTimeoutS))
	defer cancel()
	h, e := r.engines[iid].client.Prefill(lctx, c.ex.endpoint, vllm.PrefillBody(c.adm.body, r.cfg.Model), legID(c.rid, n, fault.Prefill))
	c.facts.upstreamP += r.now() - start
	if h != nil {
		c.reportedCache(iid, h.CachedTokens)
	}
	r.locked(func() {
		r.core.PrefillDone(r.now(), iid, c.rid)
		r.seatFreedLocked()
	})
	return h, start, e
}

func legID(rid string, attempt int, phase fault.Phase) string {
	return fmt.Sprintf("%s-a%d-%s", rid, attempt, phase)
}

// decodeLeg runs the consumer leg and relays or assembles its output.
func (c *call) decodeLeg(ctx context.Context, n int, iid string, kvp []byte) error {
	r := c.r
	c.att.decodes++
	start := r.now()
	defer func() { c.facts.upstreamD += r.now() - start }()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The first-token bound runs as a timer callback rather than a
	// watching goroutine: a stream then holds no goroutine of its own.
	var noFirst atomic.Bool
	ft := r.clock.AfterFunc(units.Seconds(r.cfg.Engine.FirstTokenTimeoutS), func() {
		noFirst.Store(true)
		cancel()
	})
	defer ft.Stop()
	s, e := r.engines[iid].client.OpenStream(lctx, c.ex.endpoint, vllm.DecodeBody(c.adm.body, r.cfg.Model, kvp), legID(c.rid, n, fault.Decode))
	if e != nil {
		return c.firstTokenError(e, &noFirst)
	}
	defer s.Close()
	out := newSink(c, s.Ready)
	for {
		ev, e := s.NextBuffered() // the sinks copy what they keep
		if e != nil {
			return c.firstTokenError(e, &noFirst)
		}
		if ev.Done {
			if c.facts.tokens == 0 {
				return &fault.Error{Phase: fault.Decode, Reason: fault.InvalidResponse, Class: fault.ClassStream,
					Msg: "stream ended with [DONE] before any token arrived"}
			}
			return out.finish()
		}
		if ev.Tokens > 0 && c.facts.tokens == 0 {
			ft.Stop()
			s.SetIdleTimeout(units.Seconds(r.cfg.Engine.DecodeReadTimeoutS))
		}
		c.tokensArrived(iid, ev.Tokens)
		if e := out.event(ev); e != nil {
			return e
		}
	}
}

// firstTokenError names a leg cut by the first-token deadline as such.
func (c *call) firstTokenError(e error, noFirst *atomic.Bool) error {
	if noFirst.Load() && c.facts.tokens == 0 {
		return &fault.Error{Phase: fault.Decode, Reason: fault.EngineTimeout, Timeout: true, Class: fault.ClassStream,
			Msg: fmt.Sprintf("no first token within %gs (engine.first_token_timeout_s)", c.r.cfg.Engine.FirstTokenTimeoutS)}
	}
	return e
}

// tokensArrived accounts decode tokens for timing and the core.
func (c *call) tokensArrived(iid string, n int) {
	if n <= 0 {
		return
	}
	r := c.r
	now := r.now()
	c.facts.tokensAt(now, n)
	// The handle Track returned: no lookup by rid under the lock that
	// every stream takes once per token event.
	r.locked(func() {
		if c.sz.sreq != nil {
			r.core.OutputTokensOf(now, iid, c.sz.sreq, n)
		}
	})
}

// complete settles a call whose decode leg ended with [DONE].
func (c *call) complete() {
	c.settle(outcome{terminal: journal.TerminalCompleted, status: 200})
}

// legFailed records a failed leg before any output reached the client and
// decides whether to retry. It returns true to retry.
func (c *call) legFailed(ctx context.Context, n int, phase fault.Phase, e *fault.Error, exclude map[string]bool, engines ...string) bool {
	if ctx.Err() != nil || c.ex.clientGone {
		c.ended(ctx)
		return false
	}
	c.r.attemptFailed(phase, e.Reason)
	for _, iid := range engines {
		exclude[iid] = true
	}
	backoff, reason := c.retryDecision(n, e)
	c.recordFailure(n, phase, e, backoff, reason)
	if reason != "allowed" {
		c.fail(outcome{terminal: journal.TerminalFailed, reason: e.Reason, err: openai.LegError(string(phase), e), detail: e.Msg})
		return false
	}
	return c.backoff(ctx, backoff)
}

// handoffExpired ends an attempt whose KV handoff outlived its bound:
// retry with a fresh prefill, or answer 504 handoff_expired.
func (c *call) handoffExpired(ctx context.Context, n int, e *fault.Error, exclude map[string]bool, producer string) bool {
	backoff, reason := c.retryDecision(n, e)
	c.recordFailure(n, fault.Decode, e, backoff, reason)
	if reason != "allowed" {
		c.fail(outcome{terminal: journal.TerminalExpired, reason: fault.Handoff, detail: e.Msg,
			err: openai.ServerError(504, "handoff_expired", "the KV handoff expired before decode could start")})
		return false
	}
	exclude[producer] = true
	return c.backoff(ctx, backoff)
}

// retryDecision says whether a failed attempt may be retried, and after
// what backoff: full jitter under min(cap, base × 2^(n−1)).
func (c *call) retryDecision(n int, e *fault.Error) (delay float64, reason string) {
	switch {
	case !e.Transient():
		return 0, "non_transient"
	case n >= c.r.cfg.Serving.MaxAttempts:
		return 0, "attempt_limit"
	}
	c.r.locked(func() { delay, reason = c.reserveRetryLocked(n) })
	return delay, reason
}

// reserveRetryLocked draws attempt n's backoff and reserves a retry
// credit for it, unless the backoff would pass the call's deadline or the
// shared budget is spent.
func (c *call) reserveRetryLocked(n int) (float64, string) {
	r := c.r
	s := r.cfg.Serving
	delay := r.rng.Float64() * math.Min(s.RetryCapS, s.RetryBaseS*math.Pow(2, float64(n-1)))
	if !r.clock.Now().Add(units.Seconds(delay)).Before(c.adm.deadline) {
		return 0, "original_deadline"
	}
	if r.stats.Credits < 1 {
		r.stats.RetryDenied++
		r.metrics.RetryDenied.Inc()
		return 0, "shared_budget"
	}
	r.stats.Credits-- // reserved now, spent when the retry's prefill dispatches
	r.metrics.RetryCredits.Set(r.stats.Credits)
	c.att.reserved = true
	return delay, "allowed"
}

func (c *call) recordFailure(n int, phase fault.Phase, e *fault.Error, backoff float64, reason string) {
	f := journal.AttemptFailure{At: c.r.now(), Attempt: n, Phase: phase, Reason: e.Reason,
		ErrorType: journal.Ptr(string(e.Class)), ErrorMessage: e.Msg, Transient: e.Transient(),
		OutputStarted: c.ex.committed, RetryScheduled: reason == "allowed" || reason == journal.RetryFailover || reason == journal.RetryReplaced,
		RetryReason: reason}
	if c.att.prefillIID != "" {
		f.PrefillIID = journal.Ptr(c.att.prefillIID)
	}
	if phase == fault.Decode && c.att.decodeIID != "" {
		f.DecodeIID = journal.Ptr(c.att.decodeIID)
	}
	if e.Status != 0 {
		f.Status = journal.Ptr(e.Status)
	}
	if reason == "allowed" {
		f.BackoffS = journal.Ptr(backoff)
	}
	c.att.failures = append(c.att.failures, f)
	c.facts.discardOutput() // partial output of a failed attempt is discarded
}

// attemptFailed counts a failed attempt of phase for reason.
func (r *Router) attemptFailed(phase fault.Phase, reason fault.Reason) {
	r.locked(func() { r.stats.AttemptFailed(string(phase), string(reason)) })
}

// backoff waits before the next attempt; false when the call ended meanwhile.
func (c *call) backoff(ctx context.Context, d float64) bool {
	c.phase = fault.Backoff
	c.att.clearEngines()
	select {
	case <-c.r.clock.After(units.Seconds(d)):
		return true
	case <-ctx.Done():
		c.ended(ctx)
		return false
	}
}

// outputFailed ends a stream that already delivered output: one terminal
// error event, no retry.
func (c *call) outputFailed(ctx context.Context, e *fault.Error) {
	if ctx.Err() != nil || c.ex.clientGone {
		c.ended(ctx)
		return
	}
	reason := e.Reason
	if e.CutAfter(c.facts.tokens) {
		reason = fault.OutputCut // the engine's own cause stays in the attempt and the detail
	}
	c.r.attemptFailed(fault.Decode, e.Reason)
	c.recordFailureAfterOutput(e)
	c.ex.streamError("failed")
	c.settle(outcome{terminal: journal.TerminalFailed, reason: reason, status: 200, detail: e.Msg,
		err: openai.ServerError(200, "failed", "")})
}

func (c *call) recordFailureAfterOutput(e *fault.Error) {
	tokens, first, last := c.facts.tokens, c.facts.firstTok, c.facts.lastTok
	c.recordFailure(c.att.n, fault.Decode, e, 0, "output_started")
	c.facts.tokens, c.facts.firstTok, c.facts.lastTok = tokens, first, last // delivered output stays delivered
}
