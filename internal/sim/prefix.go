package sim

import (
	"slices"

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
func blockKeys(a Arrival, idx, bs int) []blockKey { return appendBlockKeys(nil, a, idx, bs) }

// appendBlockKeys is blockKeys into dst's storage.
func appendBlockKeys(dst []blockKey, a Arrival, idx, bs int) []blockKey {
	n := max(a.InputLen/bs, 0)
	out := slices.Grow(dst[:0], n)[:n]
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
// blocks, like simengine's (which hashes real token ids). Blocks live in
// a ring of nodes it reuses (no allocation per block) and are found per
// namespace: a prompt's blocks are runs of consecutive j in at most three
// namespaces, so a lookup is a slice index after the first of each run.
type simCache struct {
	bs     int
	spaces map[uint64]*blockSpace
	nodes  []cacheNode // nodes[0] is the ring's sentinel: next is the least recently used
	free   []int32
	size   int         // resident blocks
	last   *blockSpace // the namespace found last, nil when none or evicted
	spare  []*blockSpace
}

// blockSpace is one namespace's resident blocks.
type blockSpace struct {
	ns   uint64
	at   []int32 // the node holding block j, 0 when it is not resident
	live int
}

type cacheNode struct {
	sp         *blockSpace
	j          int
	prev, next int32
}

func newSimCache(bs int) *simCache {
	return &simCache{bs: bs, spaces: map[uint64]*blockSpace{}, nodes: make([]cacheNode, 1)}
}

// space is namespace ns's table; nil when it holds nothing and create is
// false.
func (c *simCache) space(ns uint64, create bool) *blockSpace {
	if c.last != nil && c.last.ns == ns {
		return c.last
	}
	sp := c.spaces[ns]
	if sp == nil && create {
		if n := len(c.spare); n > 0 {
			sp, c.spare = c.spare[n-1], c.spare[:n-1]
			*sp = blockSpace{ns: ns, at: sp.at[:0]}
		} else {
			sp = &blockSpace{ns: ns}
		}
		c.spaces[ns] = sp
	}
	if sp != nil {
		c.last = sp
	}
	return sp
}

// node is the node holding k, 0 when k is not resident.
func (c *simCache) node(k blockKey) int32 {
	sp := c.space(k.ns, false)
	if sp == nil || k.j >= len(sp.at) {
		return 0
	}
	return sp.at[k.j]
}

// resident is the cached prompt tokens vLLM would hit: whole leading
// blocks, never the last prompt token. touch refreshes their LRU place.
func (c *simCache) resident(keys []blockKey, inputLen int, touch bool) int {
	usable := min(len(keys), max(inputLen-1, 0)/c.bs)
	n := 0
	for ; n < usable; n++ {
		x := c.node(keys[n])
		if x == 0 {
			break
		}
		if touch {
			c.unlink(x)
			c.pushBack(x)
		}
	}
	return n * c.bs
}

// store makes a computed prompt's blocks resident and evicts the least
// recently used beyond room.
func (c *simCache) store(keys []blockKey, room int) {
	for _, k := range keys {
		if x := c.node(k); x != 0 {
			c.unlink(x)
			c.pushBack(x)
			continue
		}
		c.add(k)
	}
	for c.size > max(room, 0) {
		c.evict(c.nodes[0].next)
	}
}

// add makes k resident as the most recently used block.
func (c *simCache) add(k blockKey) {
	sp := c.space(k.ns, true)
	if len(sp.at) <= k.j {
		sp.at = slices.Grow(sp.at, k.j+1-len(sp.at))[:k.j+1] // a spare's storage is zeros
	}
	var x int32
	if n := len(c.free); n > 0 {
		x, c.free = c.free[n-1], c.free[:n-1]
	} else {
		x = int32(len(c.nodes))
		c.nodes = append(c.nodes, cacheNode{})
	}
	c.nodes[x] = cacheNode{sp: sp, j: k.j}
	sp.at[k.j] = x
	sp.live++
	c.size++
	c.pushBack(x)
}

// evict drops node x's block; a namespace left empty is forgotten.
func (c *simCache) evict(x int32) {
	c.unlink(x)
	sp := c.nodes[x].sp
	sp.at[c.nodes[x].j] = 0
	if sp.live--; sp.live == 0 {
		delete(c.spaces, sp.ns)
		if c.last == sp {
			c.last = nil
		}
		c.spare = append(c.spare, sp) // at is all zeros again
	}
	c.nodes[x] = cacheNode{}
	c.free = append(c.free, x)
	c.size--
}

func (c *simCache) unlink(x int32) {
	n := &c.nodes[x]
	c.nodes[n.prev].next, c.nodes[n.next].prev = n.next, n.prev
}

func (c *simCache) pushBack(x int32) {
	tail := c.nodes[0].prev
	c.nodes[x].prev, c.nodes[x].next = tail, 0
	c.nodes[tail].next, c.nodes[0].prev = x, x
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

// stored caches r's prompt on e once its prefill completed; r's block
// names are not needed after.
func (rn *runner) stored(e *engine, r *request) {
	if e.cache == nil {
		return
	}
	st := e.m.Stats()
	e.cache.store(r.blocks, st.TotalBlocks-st.UsedBlocks+len(r.blocks))
	rn.dropBlocks(r)
}

// dropBlocks keeps r's block names' storage for a later arrival.
func (rn *runner) dropBlocks(r *request) {
	if r.blocks != nil {
		rn.spareBlocks = append(rn.spareBlocks, r.blocks[:0])
		r.blocks = nil
	}
}

// spareBlockKeys is storage for an arrival's block names.
func (rn *runner) spareBlockKeys() []blockKey {
	n := len(rn.spareBlocks)
	if n == 0 {
		return nil
	}
	b := rn.spareBlocks[n-1]
	rn.spareBlocks = rn.spareBlocks[:n-1]
	return b
}

// DemoWarmProfile is DemoProfile with a warm-prefill fit: a cached prefix
// is attended to but not recomputed (the quadratic term covers the suffix
// against the whole context, d' the cost of reading the cached KV).
func DemoWarmProfile(iid string) profile.Row { return DemoProfile(iid).WithWarmFit(2e-6, 65536) }
