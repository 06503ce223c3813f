package simengine

import "hash/fnv"

// prefixCache is vLLM's automatic prefix caching as the profiler sees it:
// full KV blocks of earlier prompts, keyed by the hash of every token up
// to the block's end, so a later prompt sharing a block-aligned prefix
// reports those tokens as cached and pays only for the rest. It is only
// consulted when Config.PrefixCaching is on; the engine mutex guards it.
type prefixCache struct {
	block  int
	blocks map[uint64]struct{}
}

// prefixCacheMaxBlocks bounds the cache; past it the cache starts over,
// as an engine under pressure evicts.
const prefixCacheMaxBlocks = 1 << 16

func newPrefixCache(block int) *prefixCache {
	return &prefixCache{block: block, blocks: map[uint64]struct{}{}}
}

// lookupLocked returns how many leading tokens of prompt have cached KV: a
// whole number of blocks, never the last prompt token (vLLM recomputes it
// to produce the first output token).
func (c *prefixCache) lookupLocked(prompt []int64) int {
	h := fnv.New64a()
	hit := 0
	for end := c.block; end < len(prompt); end += c.block {
		writeTokens(h, prompt[end-c.block:end])
		if _, ok := c.blocks[h.Sum64()]; !ok {
			break
		}
		hit = end
	}
	return hit
}

// insertLocked records every full block of prompt.
func (c *prefixCache) insertLocked(prompt []int64) {
	if len(c.blocks) > prefixCacheMaxBlocks {
		c.blocks = map[uint64]struct{}{}
	}
	h := fnv.New64a()
	for end := c.block; end <= len(prompt); end += c.block {
		writeTokens(h, prompt[end-c.block:end])
		c.blocks[h.Sum64()] = struct{}{}
	}
}

func writeTokens(h interface{ Write([]byte) (int, error) }, ids []int64) {
	var b [8]byte
	for _, id := range ids {
		for i := range b {
			b[i] = byte(id >> (8 * i))
		}
		_, _ = h.Write(b[:])
	}
}

// localPrefixHit is the cached-token count of a locally computed prompt,
// recording the prompt for later requests; 0 with prefix caching off.
func (e *Engine) localPrefixHit(prompt []int64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prefix == nil {
		return 0
	}
	hit := e.prefix.lookupLocked(prompt)
	e.prefix.insertLocked(prompt)
	e.met.add("vllm:prefix_cache_hits_total", "", float64(hit))
	return hit
}

// promptDetails is usage.prompt_tokens_details: vLLM reports cached_tokens
// when prefix caching served part of the prompt, and null otherwise.
func (x *genRun) promptDetails() any {
	if x.cached == 0 {
		return nil
	}
	return map[string]int{"cached_tokens": x.cached}
}
