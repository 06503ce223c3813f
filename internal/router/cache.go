package router

import (
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// Cache-aware prefill placement (runtime reference §2.3): the router keeps
// a residency view per engine from its sidecar (residency.Tracker, one
// refresh per monitor interval), looks each tokenized prompt up in every
// known view, and hands the evidence to the core, which prices the prefill
// at the lower of cold and warm. Anything that makes the evidence unsafe
// leaves it out: the prefill is then priced cold.

// cacheEvidence is the request's cache evidence as residency stands now:
// nil (cold) unless the prompt's token ids are known exactly and its shape
// allows warm pricing; ok is false when there is nothing to look up. It
// runs at sizing and again before every placement, so residency lost while
// the request waited prices it cold (§2.3).
func (c *call) cacheEvidence() (cached map[string]int, ok bool) {
	if c.r.cache == nil || len(c.sz.tokenIDs) == 0 || openai.PricesCold(c.adm.body) {
		return nil, false
	}
	if c.sz.hashes == nil {
		c.sz.hashes = residency.Hashes{}
	}
	c.sz.cacheEv = c.r.cache.Cached(c.sz.tokenIDs, c.sz.hashes)
	if len(c.sz.cacheEv.Cached) == 0 {
		return nil, true
	}
	return c.sz.cacheEv.Cached, true
}

// placedCache records how the placement was priced: cache_placement for a
// warm one, null for a cold one (a later attempt replaces the first).
func (c *call) placedCache(pl sched.Placement) {
	if c.r.cache == nil {
		return
	}
	w := pl.Warm
	if w == nil {
		c.r.metrics.CachePlaced(pl.IID, false, 0)
		c.facts.cachePl = nil
		return
	}
	c.r.metrics.CachePlaced(pl.IID, true, w.CachedTokens)
	c.facts.cachePl = &journal.CachePlacement{PlacedIID: pl.IID, PlacedCachedTokens: w.CachedTokens,
		EvidenceSequence: c.sz.cacheEv.Sequence[pl.IID], PredictedPrefillS: w.PredictedS, ColdPrefillS: w.ColdS,
		ColdChoiceIID: w.ColdChoice}
}

// reportedCache counts the cached tokens the producer reported.
func (c *call) reportedCache(iid string, n *int) {
	if n == nil {
		return
	}
	c.r.metrics.CacheReported(iid, *n)
}

// residencyState is the state document's residency map.
func (r *Router) residencyState() map[string]residency.EngineState {
	if r.cache == nil {
		return map[string]residency.EngineState{}
	}
	return r.cache.State()
}
