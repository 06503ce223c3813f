package sched

import (
	"fmt"
	"math"
	"testing"
)

// backlog dispatches n prefill legs of tokens each on iid at time 0: with
// row's profile a 49,000-token leg is 0.5 s of prefill. The decode check
// counts legs in prefill as the decode pool's to come (decodeproject.go),
// and three such legs are more than newCore's TPOT target allows on one
// decode engine; the target is loosened so that only the prefill backlog
// binds, as these tests mean.
func backlog(c *Core, iid string, n, tokens int) {
	c.opt.TPOT = 1
	for k := 0; k < n; k++ {
		id := fmt.Sprintf("%s-b%d", iid, k)
		c.Track(0, req(id, tokens, 8))
		c.dispatched(0, iid, id, Prefill)
	}
}

func TestQueueWaitsWhileTheTTFTCanBeMet(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	backlog(c, "p0", 3, 49000) // 1.5 s of prefill ahead: a small request cannot meet 1 s now
	c.Track(0, req("small", 100, 8))
	_, ref := c.Place(0, "small", nil, First)
	own := 1e-5*100 + 0.01
	if ref == nil || !ref.Wait || ref.Cause != CauseQueue || math.Abs(ref.Deadline-(1-own)) > 1e-9 {
		t.Fatalf("refusal %+v, want a queue wait until %.3f (arrival + ttft − own prefill)", ref, 1-own)
	}
	if c.Queued(nil)[0] != "small" || c.Snapshot(0).Queue.Depth != 1 {
		t.Fatalf("queue %q depth %d, want small queued", c.Queued(nil), c.Snapshot(0).Queue.Depth)
	}
	// Two of the three backlog legs finish: 0.5 s ahead, it fits.
	c.PrefillDone(0.3, "p0", "p0-b0")
	c.PrefillDone(0.3, "p0", "p0-b1")
	pl, ref := c.Place(0.3, "small", nil, First)
	if ref != nil || pl.IID != "p0" {
		t.Fatalf("after the backlog drained: %v %+v, want p0", pl.IID, ref)
	}
	if c.QueueLen() != 0 || c.Snapshot(0.3).Queue.KVTokens != 0 {
		t.Errorf("placed request still queued: %q", c.Queued(nil))
	}
}

func TestQueueDeadlinePasses(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	backlog(c, "p0", 4, 49000)
	c.Track(0, req("r", 100, 8))
	_, ref := c.Place(0, "r", nil, First)
	if ref == nil || !ref.Wait {
		t.Fatalf("refusal %+v, want a wait", ref)
	}
	_, ref = c.Place(ref.Deadline, "r", nil, First)
	if ref == nil || ref.Wait || ref.Cause != CauseDeadline || ref.RetryAfter < 1 {
		t.Fatalf("at its deadline: %+v, want cause deadline with a Retry-After", ref)
	}
	if c.QueueLen() != 0 {
		t.Errorf("expired request still queued")
	}
}

// Waiting requests are offered again earliest deadline first (Queued's
// order), and the queue never holds back a request that fits now.
func TestQueueEarliestDeadlineFirst(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	backlog(c, "p0", 3, 49000)
	// a's long prompt leaves it less time to wait: its deadline is earlier
	// than b's, which arrived later with a short one.
	c.Track(0, req("b", 100, 8))   // own 0.011 s: deadline 0.989
	c.Track(0, req("a", 40000, 8)) // own 0.41 s: deadline 0.59
	c.Track(0.1, req("c", 100, 8)) // deadline 1.089
	for _, id := range []string{"b", "a", "c"} {
		if _, ref := c.Place(0.1, id, nil, First); ref == nil || !ref.Wait {
			t.Fatalf("%s: %+v, want a wait", id, ref)
		}
	}
	if got := c.Queued(nil); fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("queue order %v, want [a b c] (earliest deadline first)", got)
	}
	// Two backlog legs finish: a (0.41 s) cannot meet its target behind
	// the last one, b can, and goes although a is first in line.
	c.PrefillDone(0.2, "p0", "p0-b0")
	c.PrefillDone(0.2, "p0", "p0-b1")
	if _, ref := c.Place(0.2, "a", nil, First); ref == nil || !ref.Wait {
		t.Fatalf("a: %+v, want it still waiting", ref)
	}
	if pl, ref := c.Place(0.2, "b", nil, First); ref != nil || pl.IID != "p0" {
		t.Fatalf("b held back behind a: %v %+v", pl.IID, ref)
	}
	if got := c.Queued(nil); fmt.Sprint(got) != "[a c]" {
		t.Errorf("queue after b: %v, want [a c]", got)
	}
}

func TestQueueBounds(t *testing.T) {
	cases := []struct {
		name   string
		limits QueueLimits
		reqs   []Request
		want   []string // per request: "wait" or a cause
	}{
		{"count", QueueLimits{Requests: 2}, []Request{req("a", 100, 8), req("b", 100, 8), req("c", 100, 8)},
			[]string{"wait", "wait", CauseQueueFull}},
		{"kv tokens", QueueLimits{Requests: 10, KVTokens: 5000}, []Request{req("a", 3000, 8), req("b", 3000, 8)},
			[]string{"wait", CauseQueueFull}},
		// The decode pool's 100k tokens bound the queue by default.
		{"decode pool capacity", QueueLimits{Requests: 10}, []Request{req("a", 60000, 8), req("b", 60000, 8)},
			[]string{"wait", CauseQueueFull}},
		// A prompt that can never meet the target is refused, not queued.
		{"prompt", QueueLimits{Requests: 10}, []Request{req("long", 100000, 8)}, []string{CausePrompt}},
		{"off", QueueLimits{}, []Request{req("a", 100, 8)}, []string{CauseQueue}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, "p0:prefill", "d0:decode")
			c.opt.Queue = tc.limits
			backlog(c, "p0", 3, 49000)
			for k, r := range tc.reqs {
				c.Track(0, r)
				_, ref := c.Place(0, r.RID, nil, First)
				got := "placed"
				switch {
				case ref != nil && ref.Wait:
					got = "wait"
				case ref != nil:
					got = ref.Cause
				}
				if got != tc.want[k] {
					t.Errorf("%s: %s (%+v), want %s", r.RID, got, ref, tc.want[k])
				}
			}
		})
	}
}

func TestQueueForgetsFinishedRequests(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	backlog(c, "p0", 3, 49000)
	c.Track(0, req("gone", 100, 8))
	c.Place(0, "gone", nil, First)
	c.Finished(0.1, "gone") // the client went away while it waited
	if c.QueueLen() != 0 || c.Snapshot(0.1).Queue.Depth != 0 {
		t.Fatalf("a finished request is still queued")
	}
	// A request tracked again under the same rid starts afresh.
	c.Track(0.2, req("x", 100, 8))
	c.Place(0.2, "x", nil, First)
	c.Track(0.3, req("x", 100, 8))
	if c.Snapshot(0.3).Queue.Depth != 0 {
		t.Errorf("the replaced request's queue entry stayed")
	}
}

// Retry-After is the core's projection of when the queue drains, not a
// constant: the shortest backlog plus the queued work over the prefill
// engines.
func TestQueueRetryAfterIsTheDrainProjection(t *testing.T) {
	for _, tc := range []struct {
		engines []string
		want    int
	}{
		{[]string{"p0:prefill", "d0:decode"}, 3},               // 1.5 s + 3 × 0.31 s
		{[]string{"p0:prefill", "p1:prefill", "d0:decode"}, 2}, // 1.5 s + 3 × 0.31 s / 2
	} {
		c := newCore(t, tc.engines...)
		c.opt.Queue = QueueLimits{Requests: 3}
		backlog(c, "p0", 3, 49000)
		if c.Instance("p1") != nil {
			backlog(c, "p1", 3, 49000)
		}
		for k := 0; k < 3; k++ {
			id := fmt.Sprintf("r%d", k)
			c.Track(0, req(id, 30000, 8))
			if _, ref := c.Place(0, id, nil, First); ref == nil || !ref.Wait {
				t.Fatalf("%v: %s not queued: %+v", tc.engines, id, ref)
			}
		}
		c.Track(0, req("over", 100, 8))
		_, ref := c.Place(0, "over", nil, First)
		if ref == nil || ref.Cause != CauseQueueFull || ref.RetryAfter != tc.want {
			t.Errorf("%v: %+v, want queue_full with Retry-After %d (drain %.3f s)", tc.engines, ref, tc.want, c.DrainS(0))
		}
	}
}
