package simengine

import (
	"net/http"

	"github.com/narwhal-go/narwhal/internal/kvevents"
)

// pcReq is a request's prompt blocks, stored once its prefill completes.
type pcReq struct {
	hashes []uint64
	toks   []int
}

// prefixHitLocked looks a prompt up and remembers its blocks for storing
// after prefill; it returns the cached prompt tokens.
func (e *Engine) prefixHitLocked(id string, prompt []int64) int {
	if e.pc == nil {
		return 0
	}
	hs, toks := e.pc.hashes(prompt)
	e.pcReqs[id] = pcReq{hs, toks}
	return e.pc.hit(hs, len(prompt))
}

// prefixTrackLocked remembers a decode leg's blocks: the KV it pulled is
// computed here, so vLLM caches it like any other.
func (e *Engine) prefixTrackLocked(id string, prompt []int64) {
	if e.pc == nil {
		return
	}
	hs, toks := e.pc.hashes(prompt)
	e.pcReqs[id] = pcReq{hs, toks}
}

// prefixStoreLocked makes a request's prompt blocks resident once its
// first token exists. The cache may use every block that running requests
// do not hold beyond their own cached prompt.
func (e *Engine) prefixStoreLocked(id string) {
	r, ok := e.pcReqs[id]
	if !ok {
		return
	}
	delete(e.pcReqs, id)
	st := e.model.Stats()
	e.pc.store(r.hashes, r.toks, st.TotalBlocks-st.UsedBlocks+len(r.hashes))
}

func (e *Engine) forgetPrefixLocked(id string) { delete(e.pcReqs, id) }

// resetPrefixLocked empties the cache and says so on the event stream.
func (e *Engine) resetPrefixLocked() {
	clear(e.pcReqs)
	if e.pc != nil {
		e.pc.reset()
		e.pc.flush(float64(e.clock.Now().UnixNano()) / 1e9)
	}
}

// ResetPrefixCache is POST /reset_prefix_cache: every cached block is
// dropped (AllBlocksCleared), as an eviction of everything would.
func (e *Engine) ResetPrefixCache() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resetPrefixLocked()
}

// CachedBlocks is how many prompt blocks the prefix cache holds.
func (e *Engine) CachedBlocks() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pc == nil {
		return 0
	}
	return e.pc.resident()
}

// KVEventEndpoints are the bound PUB and replay endpoints ("" without
// --kv-events-config).
func (e *Engine) KVEventEndpoints() (pub, replay string) {
	if e.pc == nil || e.pc.pub == nil {
		return "", ""
	}
	return e.pc.pub.Endpoint(), e.pc.pub.ReplayEndpoint()
}

// PrefixHasher is the engine's block hasher (nil without prefix caching),
// for a sidecar that verifies the configured seed.
func (e *Engine) PrefixHasher() *kvevents.Hasher {
	if e.pc == nil {
		return nil
	}
	return e.pc.hasher
}

// resetPrefixRoute is vLLM's dev-mode POST /reset_prefix_cache.
func (e *Engine) resetPrefixRoute(w http.ResponseWriter, _ *http.Request) {
	e.ResetPrefixCache()
	w.WriteHeader(http.StatusOK)
}
