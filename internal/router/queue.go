package router

import (
	"context"

	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/units"
)

// The deadline queue's router side. The core holds the queue and decides
// (sched/queue.go); the router keeps each waiting call and, whenever room
// frees, places the waiters again itself, earliest deadline first, under
// the one lock — as the simulator's serveQueue does — and hands each its
// answer. A waiter's goroutine sleeps on its channel: nothing wakes it but
// its own answer, its deadline or its client leaving.

// queueWait is a call waiting in the deadline queue.
type queueWait struct {
	n       int
	exclude map[string]bool
	answer  chan queueAnswer // buffered 1: written once, under r.mu
}

// queueAnswer is a waiter's placement step as someone else took it.
type queueAnswer struct {
	pl  sched.Placement
	ref *sched.Refusal // nil: placed (dispatched in the core)
}

// waitLocked registers c, whose attempt n the core has just queued.
func (r *Router) waitLocked(c *call, n int, exclude map[string]bool) {
	c.att.queue = &queueWait{n: n, exclude: exclude, answer: make(chan queueAnswer, 1)}
	r.waiting[c.rid] = c
}

// serveQueueLocked places the waiting calls again, earliest deadline
// first; each that is placed, or refused for good (its deadline passed),
// gets its answer and leaves. Called whenever room frees.
func (r *Router) serveQueueLocked() {
	if len(r.waiting) == 0 {
		return
	}
	r.queued = r.core.Queued(r.queued[:0])
	for _, rid := range r.queued {
		c := r.waiting[rid]
		if c == nil {
			continue
		}
		pl, ref, _ := c.placeLocked(c.att.queue.n, c.att.queue.exclude)
		if ref != nil && ref.Wait {
			continue
		}
		r.answerLocked(c, queueAnswer{pl: pl, ref: ref})
	}
}

// answerLocked hands c its answer and takes it out of the waiters.
func (r *Router) answerLocked(c *call, a queueAnswer) {
	delete(r.waiting, c.rid)
	c.att.queue.answer <- a
}

// awaitQueue waits for c's answer, its deadline (then it places once more
// itself, and the core answers the deadline), or its client to leave.
func (c *call) awaitQueue(ctx context.Context, n int, exclude map[string]bool, deadline float64) (string, bool) {
	r := c.r
	start := r.now()
	t := r.clock.NewTimer(units.Seconds(deadline - r.now()))
	defer t.Stop()
	var a queueAnswer
	select {
	case a = <-c.att.queue.answer:
	case <-t.C():
		a = c.leaveQueue(func() queueAnswer {
			pl, ref, _ := c.placeLocked(n, exclude)
			if ref != nil && ref.Wait { // the clock read just before the deadline
				ref = &sched.Refusal{Cause: sched.CauseDeadline, RetryAfter: r.core.RetryAfter(r.now()), Message: ref.Message}
			}
			return queueAnswer{pl: pl, ref: ref}
		})
	case <-ctx.Done():
		c.leaveQueue(func() queueAnswer { return queueAnswer{} }) // a placement made meanwhile is undone by settle
		c.facts.queueWaits.Prefill += r.now() - start
		c.ended(ctx)
		return "", false
	}
	c.facts.queueWaits.Prefill += r.now() - start // before the answer's journal row
	if a.ref != nil {
		c.refused(prefillLeg(n), a.ref, a.pl)
		return "", false
	}
	return a.pl.IID, true
}

// leaveQueue takes c out of the waiters and returns step's answer; when an
// answer was handed over first, that one.
func (c *call) leaveQueue(step func() queueAnswer) queueAnswer {
	var a queueAnswer
	c.r.locked(func() {
		if c.r.waiting[c.rid] == c {
			delete(c.r.waiting, c.rid)
			a = step()
			return
		}
		a = <-c.att.queue.answer // handed over under the lock: it is there
	})
	return a
}
