package sched

// Monitor events. The router (or the simulator) reports what happened on
// the wire; the core keeps resident work and the per-interval windows.
// Dispatching a leg is not an event callers report: the placement steps
// (Place, PlaceDecode) do it themselves.

// Track registers a sized request that arrived at arrived, so that later
// steps can find it by rid; the controller's demand model counts it.
func (c *Core) Track(arrived float64, r Request) *Request {
	req := r
	req.arrived, req.forgotten = arrived, false
	if old := c.requests[r.RID]; old != nil {
		old.forgotten = true // a stale handle must not act on its successor's rid
		c.dequeue(old)
	}
	c.requests[r.RID] = &req
	c.ctl.arrival(arrived, &req)
	if c.rec != nil { // the log's copy of the evidence is built only for a listener
		c.rec(Step{Kind: StepTrack, Now: arrived, RID: r.RID, InputLen: r.InputLen, WantedLen: r.WantedLen,
			Cached: cachedSorted(r.CachedTokens)})
	}
	return &req
}

// dispatched records a leg sent to engine iid.
func (c *Core) dispatched(now float64, iid, rid string, phase Phase) {
	i, r := c.byIID[iid], c.requests[rid]
	if i == nil || r == nil {
		return
	}
	c.unplace(r, now)
	r.phase, r.at = phase, i
	if phase == Prefill {
		r.producer = iid
		r.price = c.prefillTime(r, i)
		i.integrate(now)
		i.prefill[rid] = r
		i.prefillPrice += r.price
		i.prefillTokens += r.kv()
		return
	}
	r.sawToken, r.tokensHere = false, 0
	i.decode[rid] = r
	i.decodeTokens += r.kv()
}

// PrefillDone records the producer's completion: the request leaves the
// prefill map and waits for its decode leg.
func (c *Core) PrefillDone(now float64, iid, rid string) {
	if r := c.requests[rid]; r != nil && r.at != nil && r.at.IID == iid && r.phase == Prefill {
		c.unplace(r, now)
	}
	if c.rec != nil {
		c.rec(Step{Kind: StepPrefillDone, Now: now, IID: iid, RID: rid})
	}
}

// OutputTokens records n decode tokens of rid on engine iid. The gap
// before the first token on an engine is not an inter-token gap: it spans
// the KV transfer and queueing.
func (c *Core) OutputTokens(now float64, iid, rid string, n int) {
	c.outputTokens(now, iid, c.requests[rid], n)
	if c.rec != nil { // a step per token: no Step is built when no one listens
		c.rec(Step{Kind: StepOutputTokens, Now: now, IID: iid, RID: rid, Tokens: n})
	}
}

// OutputTokensOf is OutputTokens for r, the request Track returned, found
// without a lookup by rid (the simulator's step per token). It records
// the same step; once the core forgot r (Finished, or its rid tracked
// again) it changes nothing, as OutputTokens does for an unknown rid.
func (c *Core) OutputTokensOf(now float64, iid string, r *Request, n int) {
	if !r.forgotten {
		c.outputTokens(now, iid, r, n)
	}
	if c.rec != nil {
		c.rec(Step{Kind: StepOutputTokens, Now: now, IID: iid, RID: r.RID, Tokens: n})
	}
}

// OneTokenEach is one output token of each of rs on engine i at now, in
// order: exactly OutputTokensOf(now, i.IID, r, 1) for each r, recorded
// likewise (the simulator's decode step). i is this core's Instance(iid);
// nil changes and records nothing.
func (c *Core) OneTokenEach(now float64, i *Instance, rs []*Request) {
	if i == nil {
		return
	}
	if c.rec == nil {
		c.oneTokenEachOn(now, i, rs)
		return
	}
	for _, r := range rs {
		if !r.forgotten {
			c.tokensOn(now, i, r, 1)
		}
		c.rec(Step{Kind: StepOutputTokens, Now: now, IID: i.IID, RID: r.RID, Tokens: 1})
	}
}

// oneTokenEachOn is OneTokenEach without a recorder, the simulator's hot
// loop: tokensOn's n = 1 case inline, with i's gap sum and decode tokens
// carried in registers across the run (the same additions in the same
// order; nothing reads them before the run ends).
func (c *Core) oneTokenEachOn(now float64, i *Instance, rs []*Request) {
	sum, gaps, decoded := i.win.gapSum, i.win.gapTokens, 0
	for _, r := range rs {
		if r.forgotten {
			continue
		}
		if r.at == i && r.phase != Prefill {
			decoded++ // grow(r, 1), counted for i below
			r.OutputLen++
		} else {
			c.grow(r, 1)
		}
		if gap := now - r.lastToken; r.sawToken && validGap(gap) { // one gap per token, ÷1 and ×1 skipped as exact
			sum += gap
			gaps++
		}
		r.sawToken, r.lastToken = true, now
		r.tokensHere++
	}
	i.win.gapSum, i.win.gapTokens = sum, gaps
	i.decodeTokens += decoded
}

func (c *Core) outputTokens(now float64, iid string, r *Request, n int) {
	if r == nil || n <= 0 {
		return
	}
	i := r.at // tokens come from where the request is resident, save a lookup
	if i == nil || i.IID != iid {
		i = c.byIID[iid]
	}
	if i == nil {
		return
	}
	c.tokensOn(now, i, r, n)
}

// tokensOn is n > 0 output tokens of r reported by engine i.
func (c *Core) tokensOn(now float64, i *Instance, r *Request, n int) {
	c.grow(r, n)
	if r.sawToken {
		gap := now - r.lastToken
		if n != 1 { // ÷1 is exact
			gap /= float64(n)
		}
		i.win.addGap(gap, n)
	}
	r.sawToken, r.lastToken = true, now
	r.tokensHere += n
}

// Finished forgets rid everywhere.
func (c *Core) Finished(now float64, rid string) {
	if r := c.requests[rid]; r != nil {
		c.unplace(r, now)
		c.dequeue(r)
		c.ctl.finished(r)
		delete(c.requests, rid)
		r.forgotten = true
	}
	if c.rec != nil {
		c.rec(Step{Kind: StepFinished, Now: now, RID: rid})
	}
}

// unplace removes r from the engine it is resident on.
func (c *Core) unplace(r *Request, now float64) {
	i := r.at
	r.at = nil
	if i == nil {
		return
	}
	if _, ok := i.prefill[r.RID]; ok {
		i.integrate(now)
		delete(i.prefill, r.RID)
		i.prefillPrice -= r.price
		i.prefillTokens -= r.kv()
		if len(i.prefill) == 0 { // keep rounding error from accumulating
			i.prefillPrice, i.prefillTokens = 0, 0
		}
	}
	if _, ok := i.decode[r.RID]; ok {
		delete(i.decode, r.RID)
		i.decodeTokens -= r.kv()
		if len(i.decode) == 0 {
			i.decodeTokens = 0
		}
	}
}

// grow adds n output tokens to r and to the running sums of the engine it
// is resident on, so that unplace subtracts exactly what was added.
func (c *Core) grow(r *Request, n int) {
	if i := r.at; i != nil {
		if r.phase == Prefill {
			i.prefillTokens += n
		} else {
			i.decodeTokens += n
		}
	}
	r.OutputLen += n
}
