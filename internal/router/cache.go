package router

import (
	"context"
	"encoding/json"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/residency"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/units"
)

// Cache-aware prefill placement (runtime reference §2.3): the router keeps
// a residency view per engine from its sidecar (residency.Tracker, one
// refresh per monitor interval), looks each tokenized prompt up in every
// known view, and hands the evidence to the core, which prices the prefill
// at the lower of cold and warm. Anything that makes the evidence unsafe
// leaves it out: the prefill is then priced cold.

// newCacheTracker is the fleet's residency tracker, or nil when the fleet
// prices every prefill cold: no engine has a sidecar, the fleet has no
// engine_contract, or speculative decoding is on.
func newCacheTracker(cfg *fleet.Config) *residency.Tracker {
	k := cfg.EngineContract
	if k == nil || (k.SpeculativeConfig != "" && k.SpeculativeConfig != "disabled") {
		return nil
	}
	var src []residency.Source
	for _, e := range cfg.Engines {
		if u := residency.URLFromAttestation(e.AttestationURL); u != "" {
			src = append(src, residency.Source{IID: e.IID, URL: u})
		}
	}
	if len(src) == 0 {
		return nil
	}
	return residency.NewTracker(src, residency.DefaultViewLimit, units.Seconds(cfg.Engine.HealthTimeoutS))
}

// followResidency refreshes every view each monitor interval until the
// router closes: the residency loop of §3.4.
func (r *Router) followResidency(ctx context.Context) {
	defer r.cache.Close()
	t := r.clock.NewTicker(units.Seconds(r.cfg.Controller.MonitorIntervalS))
	defer t.Stop()
	for {
		r.cache.Refresh(ctx)
		for iid, st := range r.cache.State() {
			r.metrics.SetResidencyKnown(iid, st.Known)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// coldBody reports whether a request's shape prices cold whatever is
// resident: it truncates the prompt, carries documents or a reasoning
// effort (all change what the engine tokenizes), or is multimodal.
func coldBody(body map[string]json.RawMessage) bool {
	for _, k := range []string{"truncate_prompt_tokens", "documents", "reasoning_effort"} {
		if v, ok := body[k]; ok && string(v) != "null" {
			return true
		}
	}
	var msgs []struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(body["messages"], &msgs) != nil {
		return false
	}
	for _, m := range msgs {
		var parts []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			if p.Type != "text" {
				return true
			}
		}
	}
	return false
}

// cacheEvidence is the request's cache evidence as residency stands now:
// nil (cold) unless the prompt's token ids are known exactly and its shape
// allows warm pricing; ok is false when there is nothing to look up. It
// runs at sizing and again before every placement, so residency lost while
// the request waited prices it cold (§2.3).
func (c *call) cacheEvidence() (cached map[string]int, ok bool) {
	if c.r.cache == nil || len(c.tokenIDs) == 0 || coldBody(c.body) {
		return nil, false
	}
	if c.hashes == nil {
		c.hashes = residency.Hashes{}
	}
	c.cacheEv = c.r.cache.Cached(c.tokenIDs, c.hashes)
	if len(c.cacheEv.Cached) == 0 {
		return nil, true
	}
	return c.cacheEv.Cached, true
}

// placedCache records how the placement was priced: cache_placement for a
// warm one, null for a cold one (a later attempt replaces the first).
func (c *call) placedCache(pl sched.Placement) {
	if c.r.cache == nil {
		return
	}
	w := pl.Warm
	c.r.metrics.CachePlaced(pl.IID, w != nil, cachedOf(w))
	if w == nil {
		c.cachePl = nil
		return
	}
	c.cachePl = &journal.CachePlacement{PlacedIID: pl.IID, PlacedCachedTokens: w.CachedTokens,
		EvidenceSequence: c.cacheEv.Sequence[pl.IID], PredictedPrefillS: w.PredictedS, ColdPrefillS: w.ColdS,
		ColdChoiceIID: w.ColdChoice}
}

func cachedOf(w *sched.Warm) int {
	if w == nil {
		return 0
	}
	return w.CachedTokens
}

// reportedCache counts the cached tokens the producer reported.
func (c *call) reportedCache(iid string, n *int) {
	if n == nil {
		return
	}
	c.r.metrics.CacheReported(iid, *n)
}

// cacheRow puts the cache evidence on the journal row.
func (c *call) cacheRow(row *journal.RequestRow) {
	if len(c.cacheEv.Cached) > 0 {
		row.CachedTokens = c.cacheEv.Cached
	}
	row.CachePlacement = c.cachePl
}

// promptIDs is a token-id prompt's ids (a flat array, or a batch of one).
func promptIDs(body map[string]json.RawMessage) []int {
	var ids []int
	if json.Unmarshal(body["prompt"], &ids) == nil {
		return ids
	}
	var one [][]int
	if json.Unmarshal(body["prompt"], &one) == nil && len(one) == 1 {
		return one[0]
	}
	return nil
}

// residencyState is the state document's residency map.
func (r *Router) residencyState() map[string]residency.EngineState {
	if r.cache == nil {
		return map[string]residency.EngineState{}
	}
	return r.cache.State()
}
