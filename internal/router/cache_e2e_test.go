package router

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// startCacheHarness is two prefill engines and a decode engine with prefix
// caching and KV cache events, each with a sidecar serving residency, and
// a contracted router whose profiles carry a warm fit.
func startCacheHarness(t *testing.T) *harness {
	t.Helper()
	return startHarness(t, []fleet.Role{fleet.Prefill, fleet.Prefill, fleet.Decode}, harnessOptions{
		engine: func(c *simengine.Config) {
			c.Profile, c.Prefix = simengine.WarmProfile(c.Profile.IID), simengine.DevPrefixCache()
		},
		sidecars: true,
		mod: func(c *fleet.Config) {
			completeContract(c)
			c.Controller.MonitorIntervalS = 0.05
			c.Controller.Advisory = true
		},
		built: func(r *Router) {
			store := &profile.Store{Schema: profile.Schema, SchemaVersion: profile.SchemaVersion}
			for _, e := range r.cfg.Engines {
				store.Profiles = append(store.Profiles, simengine.WarmProfile(e.IID))
			}
			core, err := sched.New(r.cfg, store)
			if err != nil {
				t.Fatal(err)
			}
			r.core = core
		},
	})
}

func (h *harness) completion(t *testing.T, prompt string) *journal.RequestRow {
	t.Helper()
	resp, body := h.post(context.Background(), "/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": 3})
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
	}
	return h.row(resp.Header.Get("X-Narwhal-Request-Id"))
}

func (h *harness) residentBlocks(iid string) (int, bool) {
	st := h.router.cache.State()[iid]
	return st.ResidentBlocks["0"], st.Known
}

// End to end: a conversation's second turn is prefilled where its first
// turn's blocks are, the engine reports the cached tokens the router
// predicted, and once the holder evicts or restarts the router prices
// cold again.
func TestCacheAwarePlacementEndToEnd(t *testing.T) {
	h := startCacheHarness(t)
	for _, iid := range []string{"p0", "p1", "d0"} {
		eventually(t, "residency of "+iid+" known", func() bool { _, ok := h.residentBlocks(iid); return ok })
	}
	var doc routerdoc.StateDoc
	if err := json.Unmarshal([]byte(get(t, h.srv.URL+"/narwhal/state")), &doc); err != nil || !doc.Residency["p1"].Known || doc.Residency["p1"].Epoch == "" {
		t.Fatalf("state residency %+v (%v): want p1 known with its sidecar's epoch", doc.Residency, err)
	}
	system := strings.Repeat("You answer questions about the sea, briefly and kindly. ", 12)
	turn1 := system + "Why is the sea salty?"
	// Seed p1 directly, as if the first turn had been served there.
	direct(t, h.engines.Engines[1].URL(), "/v1/completions", map[string]any{"model": model, "prompt": turn1, "max_tokens": 1})
	eventually(t, "the router seeing p1's blocks", func() bool { n, _ := h.residentBlocks("p1"); return n > 0 })

	turn2 := turn1 + " Rivers carry minerals to it. And why is it blue?"
	row := h.completion(t, turn2)
	cp := row.CachePlacement
	if row.PrefillIID == nil || *row.PrefillIID != "p1" || cp == nil || cp.PlacedIID != "p1" || cp.ColdChoiceIID != "p0" {
		t.Fatalf("second turn prefilled on %v with cache_placement %+v; want p1 (the holder), cold choice p0", row.PrefillIID, cp)
	}
	if cp.PlacedCachedTokens <= 0 || !(cp.PredictedPrefillS < cp.ColdPrefillS) || row.CachedTokens["p1"] != cp.PlacedCachedTokens || row.CachedTokens["p0"] != 0 {
		t.Errorf("cache evidence %+v, cached_tokens %v: want p1's prefix, warm below cold, none on p0", cp, row.CachedTokens)
	}
	if got := h.gauge(t, "narwhal_cache_reported_tokens_total", map[string]string{"iid": "p1"}); got != float64(cp.PlacedCachedTokens) {
		t.Errorf("p1 reported %g cached tokens, the router predicted %d", got, cp.PlacedCachedTokens)
	}

	// Evicted: the holder's cache is reset; within one refresh the router prices cold.
	h.engines.Engines[1].ResetPrefixCache()
	eventually(t, "the router seeing p1's eviction", func() bool { n, ok := h.residentBlocks("p1"); return ok && n == 0 })
	if row := h.completion(t, turn2+" Tell me more."); row.CachePlacement != nil && row.CachePlacement.PlacedIID == "p1" {
		t.Errorf("after p1 evicted, placed warm on p1: %+v", row.CachePlacement)
	}

	// Restarted: the sidecar answers 503 for the new process; residency is unknown, priced cold.
	turn3 := system + "What lives in the deep sea?"
	_ = h.completion(t, turn3) // cold: lands on the first prefill engine with room
	eventually(t, "the router seeing the turn's blocks", func() bool {
		a, _ := h.residentBlocks("p0")
		b, _ := h.residentBlocks("p1")
		return a+b > 0
	})
	holder := 0
	if n, _ := h.residentBlocks("p1"); n > 0 {
		holder = 1
	}
	iid := []string{"p0", "p1"}[holder]
	h.engines.Engines[holder].Restart()
	eventually(t, "residency of the restarted "+iid+" unknown", func() bool { _, ok := h.residentBlocks(iid); return !ok })
	if row := h.completion(t, turn3+" And in the shallows?"); row.CachePlacement != nil || row.CachedTokens[iid] != 0 {
		t.Errorf("after %s restarted: cache_placement %+v cached_tokens %v, want cold and no evidence on it", iid, row.CachePlacement, row.CachedTokens)
	}
}
