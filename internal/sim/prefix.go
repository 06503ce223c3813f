package sim

import (
	"container/list"

	"github.com/narwhal-go/narwhal/internal/profile"
)

// The simulated engines' prefix caches. A prompt's blocks are named by
// what they hold, not by hashing token ids: block j of a prompt belongs to
// its system prompt while j is inside it, else to its session's history
// (which only grows, turn by turn), else to the request alone. Two prompts
// share block j exactly when they share everything up to it, as vLLM's
// chained hashes do.

type blockKey struct {
	ns uint64 // 1<<62 | system, 1<<61 | session, or 1<<60 | request index
	j  int
}

// blockKeys names the full blocks of request idx's prompt.
func blockKeys(a Arrival, idx, bs int) []blockKey {
	n := a.InputLen / bs
	out := make([]blockKey, n)
	for j := range out {
		switch {
		case a.System > 0 && (j+1)*bs <= a.SystemLen:
			out[j] = blockKey{1<<62 | uint64(a.System), j}
		case a.Session > 0:
			out[j] = blockKey{1<<61 | uint64(a.Session), j}
		default:
			out[j] = blockKey{1<<60 | uint64(idx), j}
		}
	}
	return out
}

// simCache is one engine's block table in LRU order, bounded by its KV
// blocks, like simengine's (which hashes real token ids).
type simCache struct {
	bs  int
	lru *list.List
	at  map[blockKey]*list.Element
}

func newSimCache(bs int) *simCache {
	return &simCache{bs: bs, lru: list.New(), at: map[blockKey]*list.Element{}}
}

// resident is the cached prompt tokens vLLM would hit: whole leading
// blocks, never the last prompt token. touch refreshes their LRU place.
func (c *simCache) resident(keys []blockKey, inputLen int, touch bool) int {
	usable := min(len(keys), max(inputLen-1, 0)/c.bs)
	n := 0
	for ; n < usable; n++ {
		el := c.at[keys[n]]
		if el == nil {
			break
		}
		if touch {
			c.lru.MoveToBack(el)
		}
	}
	return n * c.bs
}

// store makes a computed prompt's blocks resident and evicts the least
// recently used beyond room.
func (c *simCache) store(keys []blockKey, room int) {
	for _, k := range keys {
		if el := c.at[k]; el != nil {
			c.lru.MoveToBack(el)
			continue
		}
		c.at[k] = c.lru.PushBack(k)
	}
	for c.lru.Len() > max(room, 0) {
		el := c.lru.Front()
		delete(c.at, el.Value.(blockKey))
		c.lru.Remove(el)
	}
}

// evidence is what a cache-aware router would know at arrival: each
// engine's resident prefix (the simulation's residency is exact and
// current — the event stream has no lag here).
func (rn *runner) evidence(r *request) map[string]int {
	if !rn.arm.CacheAware || !rn.f.PrefixCaching {
		return nil
	}
	out := make(map[string]int, len(rn.engines))
	for _, e := range rn.engines {
		out[e.iid] = e.cache.resident(r.blocks, r.a.InputLen, false)
	}
	return out
}

// hit is the prefix a leg finds on e when it is admitted.
func (rn *runner) hit(e *engine, r *request) int {
	if e.cache == nil {
		return 0
	}
	return e.cache.resident(r.blocks, r.a.InputLen, true)
}

// stored caches r's prompt on e once its prefill completed.
func (rn *runner) stored(e *engine, r *request) {
	if e.cache == nil {
		return
	}
	st := e.m.Stats()
	e.cache.store(r.blocks, st.TotalBlocks-st.UsedBlocks+len(r.blocks))
}

// DemoWarmProfile is DemoProfile with a warm-prefill fit: a cached prefix
// is attended to but not recomputed (the quadratic term covers the suffix
// against the whole context, d' the cost of reading the cached KV).
func DemoWarmProfile(iid string) profile.Row { return DemoProfile(iid).WithWarmFit(2e-6, 65536) }
