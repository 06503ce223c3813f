package sched

// The decode check's projection (admitDecode). A request's decode check
// runs at its first placement, before its prefill, so the batch it must
// fit is not the decode pool of the moment: every request admitted before
// it and still in prefill will reach the pool first, and its own TPOT
// carries the handoff to its decode engine.

// tpotTarget is the token interval r's decode batch must hold for r's
// TPOT to meet the target. TPOT is measured from the prefill's end, (last
// token − prefill done) ÷ (n − 1) over n output tokens (operations.md
// §8.1), and from the prefill's end a decode leg on another engine waits
// for that engine's step in flight (up to one interval) before its first
// token takes one more: n tokens span up to n + 1 intervals over n − 1
// gaps. Without an output cap, with one token, or aggregated (the prefill
// step's token is the first, and decode goes on where it ran), the target
// itself.
func (c *Core) tpotTarget(r *Request) float64 {
	if n := r.WantedLen; n >= 2 && !c.opt.Aggregated {
		return c.opt.TPOT * float64(n-1) / float64(n+1)
	}
	return c.opt.TPOT
}

// pendingDecode is the decode legs the pool has yet to take: the requests
// in prefill (r itself excepted), each of which passed its decode check
// against a pool that did not hold the others. tokens is their KV now.
func (c *Core) pendingDecode(r *Request) (tokens, legs int) {
	for _, i := range c.instances {
		tokens += i.prefillTokens
		legs += len(i.prefill)
	}
	if r.at != nil && r.phase == Prefill {
		tokens, legs = tokens-r.kv(), legs-1
	}
	return tokens, legs
}

// decodeLevels is each pool engine's projected token interval once the
// legs now in prefill have reached the pool (c.level, scratch). The
// decode step places each leg on the engine where it adds the least
// (DecodeCost), so the legs fill the pool's lowest intervals to one level:
// water filling, every pending leg the mean of them. Aggregated, the
// intervals of the moment: each leg decodes where it prefills, and the
// pool check has no projection of which engine that is.
func (c *Core) decodeLevels(r *Request, pool []*Instance) []float64 {
	c.level = c.level[:0]
	for _, i := range pool {
		c.level = append(c.level, i.prof.TokenInterval(i.decodeTokens, len(i.decode))*i.correction)
	}
	tokens, legs := c.pendingDecode(r)
	if c.opt.Aggregated || legs <= 0 {
		return c.level
	}
	mean := tokens / legs
	c.inc = c.inc[:0]
	for k, i := range pool {
		d := i.prof.TokenInterval(i.decodeTokens+mean, len(i.decode)+1)*i.correction - c.level[k]
		c.inc = append(c.inc, max(d, minIntervalStep))
	}
	fill := waterLevel(c.level, c.inc, legs, &c.order)
	for k := range c.level {
		c.level[k] = max(c.level[k], fill)
	}
	return c.level
}

// minIntervalStep keeps a fit that prices a leg at nothing from dividing
// by zero: the leg then adds a nanosecond.
const minIntervalStep = 1e-9

// waterLevel is the level L at which legs legs, each raising engine k's
// interval by inc[k], fill the engines below it: Σ max(0, L − base[k]) ÷
// inc[k] = legs. order is scratch for base's order, lowest first.
func waterLevel(base, inc []float64, legs int, order *[]int) float64 {
	idx := (*order)[:0]
	for k := range base { // insertion sort: pools are a few engines
		idx = append(idx, k)
		for j := len(idx) - 1; j > 0 && base[idx[j]] < base[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	*order = idx
	var invInc, baseOverInc, level float64
	for m, k := range idx {
		invInc += 1 / inc[k]
		baseOverInc += base[k] / inc[k]
		level = (float64(legs) + baseOverInc) / invInc
		if m+1 == len(idx) || level <= base[idx[m+1]] {
			break
		}
	}
	return level
}
