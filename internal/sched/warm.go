package sched

import (
	"maps"
	"slices"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Cache-aware prefill pricing (runtime reference §2.3). The caller gives a
// request its cache evidence at Track: for each engine whose residency is
// known, how many leading prompt tokens it holds. The core prices the
// prefill on such an engine at the lower of the cold price and the
// profile's warm price for that prefix; every other engine, and every
// engine without a warm fit or outside the warm domain, is priced cold.
// The caller leaves the evidence out whenever the reference prices cold
// regardless (an estimated input length, a multimodal prompt, …).

// Warm is a warm placement's evidence: what cache_placement records.
type Warm struct {
	CachedTokens int     // placed_cached_tokens
	PredictedS   float64 // predicted_prefill_s: the warm price on the placed engine
	ColdS        float64 // cold_prefill_s: the cold price on the placed engine
	ColdChoice   string  // cold_choice_iid: where cold pricing would have placed it
}

// prefillTime is T(r, i): cold, or the lower of cold and warm with the
// prefix i holds — the fit inside its measured domain, its bounded
// extrapolation outside it when most of the prompt is cached
// (profile.Row.WarmPrefillTime: a conversation's follow-up turn).
func (c *Core) prefillTime(r *Request, i *Instance) float64 {
	cold := i.prof.PrefillTime(r.InputLen)
	p := r.CachedTokens[i.IID]
	if p <= 0 || p >= r.InputLen {
		return cold
	}
	if warm, _, ok := i.prof.WarmPrefillTime(p, r.InputLen-p); ok && warm < cold {
		return warm
	}
	return cold
}

// warmOn is the evidence of placing r on i, or nil when i prices r cold.
func (c *Core) warmOn(r *Request, i *Instance, cands []*Instance, fallback bool) *Warm {
	own, cold := c.prefillTime(r, i), i.prof.PrefillTime(r.InputLen)
	if own >= cold {
		return nil
	}
	w := &Warm{CachedTokens: r.CachedTokens[i.IID], PredictedS: own, ColdS: cold}
	coldReq := *r
	coldReq.CachedTokens = nil
	best, _, _ := cheapest(cands, func(j *Instance) Cost { return c.prefillCost(&coldReq, j, fallback) },
		func(k Cost) bool { return k.Secondary <= c.opt.TTFT })
	if best != nil {
		w.ColdChoice = best.IID
	}
	return w
}

// cachedSorted is a request's evidence as sorted pairs, for the step log.
func cachedSorted(m map[string]int) []CachedOn {
	if len(m) == 0 {
		return nil
	}
	out := make([]CachedOn, 0, len(m))
	for iid, n := range m {
		out = append(out, CachedOn{IID: iid, Tokens: n})
	}
	slices.SortFunc(out, func(a, b CachedOn) int {
		if a.IID < b.IID {
			return -1
		}
		if a.IID > b.IID {
			return 1
		}
		return 0
	})
	return out
}

// CachedOn is one engine's cache evidence in a Track step.
type CachedOn struct {
	IID    string
	Tokens int
}

// CachedMap turns a Track step's evidence back into a request's map.
func CachedMap(pairs []CachedOn) map[string]int {
	if len(pairs) == 0 {
		return nil
	}
	m := make(map[string]int, len(pairs))
	for _, p := range pairs {
		m[p.IID] = p.Tokens
	}
	return m
}

// arrivalPrice is what the demand model charges an arrival (§2.7.2): the
// lower of the fleet-mean cold prefill time and the cheapest warm price on
// a live prefill engine that holds part of its prompt.
func (k *controller) arrivalPrice(r *Request) float64 {
	p := k.meanPrefill(r.InputLen)
	for _, i := range k.c.instances {
		if i.Live && i.Role == fleet.Prefill && r.CachedTokens[i.IID] > 0 {
			p = min(p, k.c.prefillTime(r, i))
		}
	}
	return p
}

// SetCacheEvidence replaces a tracked request's cache evidence before a
// placement (residency was lost, or grew, while it waited): the placement
// then prices with what is resident now. Recorded only when it changes.
func (c *Core) SetCacheEvidence(rid string, cached map[string]int) {
	r := c.requests[rid]
	if r == nil || maps.Equal(r.CachedTokens, cached) {
		return
	}
	r.CachedTokens = cached
	c.log(Step{Kind: StepCacheEvidence, RID: rid, Cached: cachedSorted(cached)})
}
