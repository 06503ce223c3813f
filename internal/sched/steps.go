package sched

// The compound steps. A leg's whole sequence in the core is one call, so
// the router and the simulator, which both drive these steps, cannot drive
// the core in different orders. Every step takes its time as an argument;
// the core has no clock of its own.

// Attempt is which placement of a request a prefill step is. The TTFT
// admission check guards a request's first placement only: a retry or a
// failover re-places work that was already admitted.
type Attempt struct {
	N          int  // 1 for the request's first attempt
	FailedOver bool // a leg of this request already moved to another engine
}

// First is a request's first attempt.
var First = Attempt{N: 1}

func (a Attempt) admits() bool { return a.N <= 1 && !a.FailedOver }

// Place is request rid's prefill step at now, in this order:
//
//  1. choose the cheapest prefill engine outside exclude (Algorithm 1
//     steps 2 and 4), or refuse: no engine, or every one at its seats
//     (Wait);
//  2. when none meets the TTFT target, count the placement unserved and,
//     under PolicyArrow only, grow the prefill pool by one engine and take
//     it (Algorithm 1 step 3, arrowGrow: the one role change a placement
//     step makes; under the other policies roles change only in Tick);
//  3. on a first admission (Attempt), the TTFT admission check, with the
//     seconds spent since Track;
//  4. the decode-side admission check;
//  5. mark the leg dispatched on the chosen engine.
//
// A refusal at 3 or 4 still returns the placement, so callers can report
// its price; any refusal leaves the request undispatched.
func (c *Core) Place(now float64, rid string, exclude map[string]bool, a Attempt) (Placement, *Refusal) {
	pl, ref := c.place(now, rid, exclude, a)
	if c.rec != nil {
		c.rec(Step{Kind: StepPlace, Now: now, RID: rid, Exclude: sortedSet(exclude), Attempt: a, Placement: pl, Refusal: ref})
	}
	return pl, ref
}

// place is Place without the log. With the deadline queue on, a first
// admission's refusal for the load of the moment becomes a wait
// (queue.go).
func (c *Core) place(now float64, rid string, exclude map[string]bool, a Attempt) (Placement, *Refusal) {
	queued := a.admits() && c.queueOn()
	if r := c.requests[rid]; queued && r != nil && r.queued == nil {
		r.deadline = c.deadlineOf(r)
	}
	r, pl, ref := c.choose(now, Prefill, rid, exclude)
	if ref == nil && a.admits() && c.opt.Predictive {
		ref = c.admitTTFT(pl, now-r.arrived)
	}
	if ref == nil {
		ref = c.admitDecode(r)
	}
	if queued && r != nil {
		ref = c.queueStep(now, r, ref)
	}
	if ref == nil {
		c.dequeue(r)
		c.dispatched(now, pl.IID, rid, Prefill)
	}
	return pl, ref
}

// PlaceDecode is request rid's decode step at now, after its prefill leg
// is done: choose the decode engine outside exclude (chooseDecode); when
// none meets the TPOT target, count the placement unserved and, under
// PolicyArrow only, grow the decode pool by one engine and take it
// (arrowGrow); then mark the leg dispatched. A refusal (no engine, or
// every one at its seats: Wait) dispatches nothing.
func (c *Core) PlaceDecode(now float64, rid string, exclude map[string]bool) (Placement, *Refusal) {
	_, pl, ref := c.choose(now, Decode, rid, exclude)
	if ref == nil {
		c.dispatched(now, pl.IID, rid, Decode)
	}
	if c.rec != nil {
		c.rec(Step{Kind: StepPlaceDecode, Now: now, RID: rid, Exclude: sortedSet(exclude), Placement: pl, Refusal: ref})
	}
	return pl, ref
}

// choose is the part both placement steps share: find rid, choose the
// phase's engine and, when none meets the SLO, count the placement
// unserved and let Arrow grow the pool (arrowGrow).
func (c *Core) choose(now float64, phase Phase, rid string, exclude map[string]bool) (*Request, Placement, *Refusal) {
	r := c.requests[rid]
	if r == nil {
		return nil, Placement{}, untracked(rid)
	}
	choose := c.choosePrefill
	if phase == Decode {
		choose = c.chooseDecode
	}
	pl, ref := choose(r, exclude)
	if ref == nil && !pl.MeetsSLO {
		if r.queued == nil { // a waiting request's new pricing is not a new placement
			c.unserved++
		}
		pl = c.arrowGrow(now, phase, r, exclude, pl)
	}
	return r, pl, ref
}

func untracked(rid string) *Refusal {
	return &Refusal{Cause: CauseUntracked, Message: "request " + rid + " is not tracked: Track it before placing it"}
}
