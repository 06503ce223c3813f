package sched

// The compound steps the router and the simulator both drive, so the
// order of the core's calls for a leg is written once.

// StartPrefill is a request's prefill step at now: place the prefill leg
// (with the TTFT admission check when check, elapsed seconds already
// spent), then run the decode-side admission check, and only when both
// pass mark the leg dispatched on the placed engine. The placement is
// returned even when a later check refuses, so callers can report its
// price; a refusal leaves the request undispatched.
func (c *Core) StartPrefill(now float64, r *Request, exclude map[string]bool, elapsed float64, check bool) (Placement, *Refusal) {
	pl, ref := c.PlacePrefill(r, exclude, elapsed, check)
	if ref == nil {
		ref = c.AdmitDecode(r)
	}
	if ref == nil {
		c.Dispatched(now, pl.IID, r.RID, Prefill)
	}
	return pl, ref
}

// StartDecode is a request's decode step at now: place the decode leg
// and, when it is placed, mark it dispatched.
func (c *Core) StartDecode(now float64, r *Request, exclude map[string]bool) (Placement, *Refusal) {
	pl, ref := c.PlaceDecode(r, exclude)
	if ref == nil {
		c.Dispatched(now, pl.IID, r.RID, Decode)
	}
	return pl, ref
}
