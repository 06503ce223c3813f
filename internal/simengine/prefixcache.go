package simengine

import (
	"container/list"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/kvevents"
	"github.com/narwhal-go/narwhal/internal/profile"
)

// PrefixCache turns on vLLM's automatic prefix caching in a simulated
// engine. vLLM enables it by default; the simulator keeps it opt-in so
// timing tests that repeat one prompt stay cold.
type PrefixCache struct {
	Enabled bool
	// HashAlgo and HashSeed are --prefix-caching-hash-algo (default
	// sha256) and the engine's PYTHONHASHSEED (default "0": a router can
	// only reproduce the hashes of an engine whose seed is fixed).
	HashAlgo kvevents.Algo
	HashSeed string
	// KVEvents is --kv-events-config; nil publishes no events.
	KVEvents *kvevents.Config
	// PromptTokensDetails is --enable-prompt-tokens-details: usage
	// carries prompt_tokens_details.cached_tokens (else null, as in vLLM).
	PromptTokensDetails bool
}

// prefixCache is the engine's block-hash table: full prompt blocks keep
// their hash after the request ends, in LRU order, until the engine needs
// the room (BlockRemoved) or restarts (AllBlocksCleared). Guarded by the
// engine mutex.
type prefixCache struct {
	hasher   *kvevents.Hasher
	capacity int // the engine's KV blocks
	lru      *list.List
	at       map[uint64]*list.Element
	pending  []kvevents.Event
	pub      *kvevents.Publisher
}

func newPrefixCache(cfg PrefixCache, blockSize, blocks int) (*prefixCache, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	algo := cfg.HashAlgo
	if algo == "" {
		algo = kvevents.SHA256
	}
	seed := cfg.HashSeed
	if seed == "" {
		seed = "0"
	}
	h, err := kvevents.NewHasher(algo, blockSize, seed)
	if err != nil {
		return nil, fmt.Errorf("simengine: prefix cache: %w", err)
	}
	c := &prefixCache{hasher: h, capacity: blocks, lru: list.New(), at: map[uint64]*list.Element{}}
	if cfg.KVEvents != nil && cfg.KVEvents.Enable {
		if c.pub, err = kvevents.NewPublisher(*cfg.KVEvents); err != nil {
			return nil, fmt.Errorf("simengine: --kv-events-config: %w", err)
		}
	}
	return c, nil
}

// hashes names a prompt's full blocks.
func (c *prefixCache) hashes(prompt []int64) ([]uint64, []int) {
	toks := make([]int, len(prompt))
	for i, t := range prompt {
		toks[i] = int(t)
	}
	return c.hasher.Externals(toks), toks
}

// hit is how many leading prompt tokens are resident, in whole blocks and
// never the last prompt token (vLLM always computes it). It refreshes the
// hit blocks' LRU position.
func (c *prefixCache) hit(hs []uint64, promptLen int) int {
	bs := c.hasher.BlockSize()
	usable := min(len(hs), max(promptLen-1, 0)/bs)
	n := 0
	for ; n < usable; n++ {
		el := c.at[hs[n]]
		if el == nil {
			break
		}
		c.lru.MoveToBack(el)
	}
	return n * bs
}

// store makes a computed prompt's blocks resident (one BlockStored for the
// new run), then evicts the least recently used blocks beyond room.
func (c *prefixCache) store(hs []uint64, toks []int, room int) {
	bs := c.hasher.BlockSize()
	var ev *kvevents.Event
	for i, h := range hs {
		if el := c.at[h]; el != nil {
			c.lru.MoveToBack(el)
			continue
		}
		c.at[h] = c.lru.PushBack(h)
		if ev == nil {
			ev = &kvevents.Event{Kind: kvevents.KindStored, BlockSize: bs, Medium: "GPU"}
			if i > 0 {
				p := hs[i-1]
				ev.Parent = &p
			}
		}
		ev.Hashes = append(ev.Hashes, h)
		ev.TokenIDs = append(ev.TokenIDs, toks[i*bs:(i+1)*bs]...)
	}
	if ev != nil {
		c.pending = append(c.pending, *ev)
	}
	c.evict(room)
}

// evict drops LRU blocks until at most room remain.
func (c *prefixCache) evict(room int) {
	var gone []uint64
	for c.lru.Len() > max(room, 0) {
		el := c.lru.Front()
		h := el.Value.(uint64)
		c.lru.Remove(el)
		delete(c.at, h)
		gone = append(gone, h)
	}
	if len(gone) > 0 {
		c.pending = append(c.pending, kvevents.Event{Kind: kvevents.KindRemoved, Hashes: gone, Medium: "GPU"})
	}
}

// reset empties the cache (an engine restart or /reset_prefix_cache).
func (c *prefixCache) reset() {
	c.lru.Init()
	clear(c.at)
	c.pending = append(c.pending[:0], kvevents.Event{Kind: kvevents.KindCleared})
}

// flush publishes the events since the last flush as one batch, as vLLM
// publishes once per scheduler step.
func (c *prefixCache) flush(ts float64) {
	if len(c.pending) == 0 {
		return
	}
	if c.pub != nil {
		_, _ = c.pub.Publish(kvevents.Batch{TS: ts, Events: c.pending})
	}
	c.pending = nil
}

func (c *prefixCache) close() {
	if c != nil && c.pub != nil {
		c.pub.Close()
	}
}

// Resident is how many blocks the cache holds.
func (c *prefixCache) resident() int { return c.lru.Len() }

// WarmProfile is DefaultProfile with a warm-prefill fit, for fleets that
// cache prefixes: a cached prefix is attended to but not recomputed (the
// cold curve's terms on the suffix, 1 µs per cached token to read it).
func WarmProfile(iid string) profile.Row { return DefaultProfile(iid).WithWarmFit(1e-6, 131072) }

// DevPrefixCache is prefix caching as the dev fleet runs it: on, cached
// tokens reported, events on free loopback ports with replay.
func DevPrefixCache() PrefixCache {
	return PrefixCache{Enabled: true, PromptTokensDetails: true, KVEvents: &kvevents.Config{Enable: true,
		Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"}}
}
