package sched

import (
	"math"
	"slices"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// The deadline queue. A request whose first placement the core would
// refuse only for the load of the moment (the prefill backlog, the decode
// pool's KV or TPOT, every engine at its seats) waits instead, for as long
// as its TTFT target can still be met: its deadline is its arrival plus
// the TTFT budget minus its own prefill on the fastest eligible engine.
// Past its deadline a request leaves with CauseDeadline: waiting longer
// could only produce a late first token.
//
// Waiting requests are placed again earliest deadline first (Queued is
// that order; the router and the simulator walk it whenever something
// frees). The
// queue never holds back a request that can be placed now: a short prompt
// that fits goes ahead of a long one that does not, as it would with no
// queue at all, so the queue only adds requests served in time.
//
// The queue is bounded by count and by the KV tokens its requests will
// hold (a queue longer than the decode pool can take within one TTFT only
// turns into deadline refusals later, so it is refused at once). The core
// keeps the queue; callers wait on their own clock and place again when
// something frees, or at the deadline the refusal names.

// Queue causes.
const (
	// CauseDeadline: the request waited in the queue until its TTFT
	// target could no longer be met.
	CauseDeadline = "deadline"
	// CauseQueueFull: the queue is at its count or KV-token bound.
	CauseQueueFull = "queue_full"
)

// QueueLimits bound the deadline queue. Requests 0 turns it off: a
// refusal is answered at once, as before the queue existed.
type QueueLimits struct {
	Requests int // most requests waiting
	// KVTokens bounds the waiting requests' peak KV (prompt + output cap);
	// 0 is the live decode pool's KV capacity from the profiles.
	KVTokens int
}

// QueueLimitsFrom reads the queue's bounds from a validated fleet.
func QueueLimitsFrom(s fleet.Serving) QueueLimits {
	return QueueLimits{Requests: s.DeadlineQueue, KVTokens: s.DeadlineQueueKVTokens}
}

// waiter is one request in the queue.
type waiter struct {
	r      *Request
	seq    uint64 // arrival order among equal deadlines (r.deadline, fixed while queued)
	tokens int    // peak KV counted against the bound
}

// waitQueue is the waiting requests sorted by (deadline, seq).
type waitQueue struct {
	items  []*waiter
	tokens int
	seq    uint64
}

func (q *waitQueue) insert(w *waiter) {
	q.seq++
	w.seq = q.seq
	at, _ := slices.BinarySearchFunc(q.items, w, func(a, b *waiter) int {
		switch {
		case a.r.deadline < b.r.deadline:
			return -1
		case a.r.deadline > b.r.deadline:
			return 1
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	q.items = slices.Insert(q.items, at, w)
	q.tokens += w.tokens
}

func (q *waitQueue) remove(w *waiter) {
	if k := slices.Index(q.items, w); k >= 0 {
		q.items = slices.Delete(q.items, k, k+1)
		q.tokens -= w.tokens
	}
}

// waitable reports whether a refusal of cause may turn into a wait: the
// load of the moment, which later placements or completions change. A
// prompt too long for the target, or no engine at all, never changes by
// waiting here (the router's readiness gate answers the second).
func waitable(cause string) bool {
	switch cause {
	case CauseQueue, CauseKVCapacity, CauseSeats, CauseAggregateUnpriced:
		return true
	}
	return false
}

func (c *Core) queueOn() bool { return c.opt.Queue.Requests > 0 }

// queueStep is the queue's part of a first placement: ref is what the
// admission checks answered (nil: admitted). It returns the refusal that
// stands: nil to dispatch, a Wait with the deadline, or a final one.
func (c *Core) queueStep(now float64, r *Request, ref *Refusal) *Refusal {
	if ref == nil {
		return nil
	}
	if !waitable(ref.Cause) {
		c.dequeue(r)
		return ref
	}
	if now >= r.deadline {
		c.dequeue(r)
		return &Refusal{Cause: CauseDeadline, RetryAfter: c.retryAfter(now),
			Message: "the request waited until its TTFT target could no longer be met; retry after the queue drains"}
	}
	if r.queued == nil {
		if full := c.enqueue(r); full != nil {
			return full
		}
	}
	// No Retry-After for a wait: the caller waits rather than telling a
	// client, and projecting it costs a pass over the queue, which a
	// pass placing every waiter again must not pay for each.
	return &Refusal{Cause: ref.Cause, Wait: true, Deadline: r.deadline,
		Message: "waiting in the deadline queue: " + ref.Message}
}

// enqueue adds r, or refuses it when the queue is full.
func (c *Core) enqueue(r *Request) *Refusal {
	w := &waiter{r: r, tokens: r.InputLen + r.WantedLen}
	if len(c.queue.items) >= c.opt.Queue.Requests {
		return &Refusal{Cause: CauseQueueFull, RetryAfter: c.retryAfter(0),
			Message: "the deadline queue is at serving.deadline_queue requests; retry after it drains"}
	}
	if bound := c.queueTokenBound(); bound > 0 && len(c.queue.items) > 0 && c.queue.tokens+w.tokens > bound {
		return &Refusal{Cause: CauseQueueFull, RetryAfter: c.retryAfter(0),
			Message: "the deadline queue holds as many KV tokens as its bound allows; retry after it drains"}
	}
	c.queue.insert(w)
	r.queued = w
	return nil
}

// dequeue takes r out of the queue if it is in it.
func (c *Core) dequeue(r *Request) {
	if r.queued != nil {
		c.queue.remove(r.queued)
		r.queued = nil
	}
}

// deadlineOf is the latest time r's first token can still meet the TTFT
// budget: arrival + budget − r's own prefill on the fastest live engine
// that can take it.
func (c *Core) deadlineOf(r *Request) float64 {
	cands, _ := c.candidates(fleet.Prefill, nil)
	own := math.Inf(1)
	for _, i := range cands {
		own = min(own, c.prefillTime(r, i))
	}
	if math.IsInf(own, 1) {
		own = 0 // no engine to price on: the budget alone bounds the wait
	}
	return r.arrived + c.budget() - own
}

// queueTokenBound is the bound on queued KV tokens: the fleet's, or the
// live decode pool's KV capacity; 0 when neither is known.
func (c *Core) queueTokenBound() int {
	if b := c.opt.Queue.KVTokens; b > 0 {
		return b
	}
	total := 0
	for _, i := range c.instances {
		if i.Live && i.Role == fleet.Decode {
			lim, ok := i.prof.DecodeTokenLimit()
			if !ok {
				return 0
			}
			total += lim
		}
	}
	return total
}

// DrainS projects the seconds until the queue has drained at now: the
// queued requests' own prefill on the fastest engine, spread over the live
// prefill engines, after the shortest backlog among them.
func (c *Core) DrainS(now float64) float64 {
	cands, _ := c.candidates(fleet.Prefill, nil)
	if len(cands) == 0 {
		return c.budget()
	}
	backlog := math.Inf(1)
	for _, i := range cands {
		backlog = min(backlog, i.prefillPrice)
	}
	work := 0.0
	for _, w := range c.queue.items {
		own := math.Inf(1)
		for _, i := range cands {
			own = min(own, c.prefillTime(w.r, i))
		}
		work += own
	}
	return backlog + work/float64(len(cands))
}

// RetryAfter is DrainS in whole seconds, at least 1: what a refused
// client is told to wait.
func (c *Core) RetryAfter(now float64) int { return c.retryAfter(now) }

func (c *Core) retryAfter(now float64) int {
	return max(1, int(math.Ceil(c.DrainS(now))))
}

// Queued appends the rids waiting in the deadline queue to dst, earliest
// deadline first, and returns it.
func (c *Core) Queued(dst []string) []string {
	for _, w := range c.queue.items {
		dst = append(dst, w.r.RID)
	}
	return dst
}

// QueueLen is the number of requests waiting in the deadline queue.
func (c *Core) QueueLen() int { return len(c.queue.items) }

// QueueView is the queue in a Snapshot.
type QueueView struct {
	Depth    int     `json:"depth"`
	KVTokens int     `json:"kv_tokens"`
	Limit    int     `json:"limit"`
	KVLimit  int     `json:"kv_limit"` // 0: unbounded
	DrainS   float64 `json:"drain_s"`  // projected seconds until it is empty
}

func (c *Core) queueView(now float64) QueueView {
	return QueueView{Depth: len(c.queue.items), KVTokens: c.queue.tokens, Limit: c.opt.Queue.Requests,
		KVLimit: c.queueTokenBound(), DrainS: c.DrainS(now)}
}
