package sched

import (
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
)

func fp(v float64) *float64 { return &v }

// warmRow is row with a warm fit: a cached prefix costs 1/10 of computing it.
func warmRow(iid string) profile.Row {
	r := row(iid)
	r.CachedTTFTA, r.CachedTTFTB, r.CachedTTFTC, r.CachedTTFTD = fp(0), fp(1e-5), fp(0.01), fp(1e-6)
	r.CachedCVMAPE = fp(0.05)
	r.CachedMinPrefixTokens, r.CachedMaxPrefixTokens = ip(16), ip(4096)
	r.CachedMinSuffixTokens, r.CachedMaxSuffixTokens = ip(1), ip(4096)
	return r
}

func newWarmCore(t *testing.T, rows ...profile.Row) *Core {
	t.Helper()
	cfg := fleet.Defaults()
	cfg.Model = "m"
	cfg.SLO = fleet.SLO{TTFT: 1, TPOT: 0.05}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: 1, Profiles: rows}
	for _, r := range rows {
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: r.IID, URL: "http://127.0.0.1:1", Role: fleet.Prefill})
	}
	cfg.Engines = append(cfg.Engines, fleet.Engine{IID: "z", URL: "http://127.0.0.1:1", Role: fleet.Decode})
	store.Profiles = append(store.Profiles, row("z"))
	c, err := New(&cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWarmPricing(t *testing.T) {
	noFit := row("b")
	cases := []struct {
		name     string
		rows     []profile.Row
		cached   map[string]int
		want     string
		warm     bool
		cachedOn int
	}{
		{"no evidence: cold, lowest iid", []profile.Row{warmRow("a"), warmRow("b")}, nil, "a", false, 0},
		{"b holds the prefix", []profile.Row{warmRow("a"), warmRow("b")}, map[string]int{"a": 0, "b": 960}, "b", true, 960},
		{"prefix outside the warm domain", []profile.Row{warmRow("a"), warmRow("b")}, map[string]int{"b": 8}, "a", false, 0},
		{"b has no warm fit", []profile.Row{warmRow("a"), noFit}, map[string]int{"b": 960}, "a", false, 0},
		{"whole prompt claimed: priced cold", []profile.Row{warmRow("a"), warmRow("b")}, map[string]int{"b": 1000}, "a", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newWarmCore(t, tc.rows...)
			c.Track(0, Request{RID: "r", InputLen: 1000, WantedLen: 10, CachedTokens: tc.cached})
			pl, ref := c.Place(0, "r", nil, First)
			if ref != nil {
				t.Fatal(ref)
			}
			if pl.IID != tc.want || (pl.Warm != nil) != tc.warm {
				t.Fatalf("placed on %s warm %+v, want %s warm %v", pl.IID, pl.Warm, tc.want, tc.warm)
			}
			if !tc.warm {
				return
			}
			w := pl.Warm
			if w.CachedTokens != tc.cachedOn || w.ColdChoice != "a" || !(w.PredictedS < w.ColdS) || pl.OwnPrefill != w.PredictedS {
				t.Errorf("warm evidence %+v own %g: want %d cached, cold choice a, warm below cold and own = warm", w, pl.OwnPrefill, tc.cachedOn)
			}
			// The resident prefill is priced warm too: the next request sees b's queue at the warm price.
			c.Track(0, Request{RID: "r2", InputLen: 100, WantedLen: 10})
			k := c.PrefillCost(c.requests["r2"], c.byIID["b"])
			if want := w.PredictedS + c.byIID["b"].prof.PrefillTime(100); k.Secondary != want {
				t.Errorf("b's queue-inclusive price %g, want warm resident %g", k.Secondary, want)
			}
		})
	}
}

func TestTrackStepRecordsCacheEvidence(t *testing.T) {
	c := newWarmCore(t, warmRow("a"), warmRow("b"))
	var steps []Step
	c.Record(func(s Step) { steps = append(steps, s) })
	c.Track(0, Request{RID: "r", InputLen: 100, CachedTokens: map[string]int{"b": 32, "a": 16}})
	if len(steps) != 1 || len(steps[0].Cached) != 2 || steps[0].Cached[0] != (CachedOn{"a", 16}) || steps[0].Cached[1] != (CachedOn{"b", 32}) {
		t.Fatalf("track step evidence %+v, want a:16 then b:32", steps)
	}
	if m := CachedMap(steps[0].Cached); m["a"] != 16 || m["b"] != 32 || len(m) != 2 {
		t.Errorf("CachedMap = %v", m)
	}
}

// The demand model charges an arrival the cheapest warm price on a live
// prefill engine holding its prefix, when that is below the fleet-mean
// cold price.
func TestDemandPricesArrivalsWarm(t *testing.T) {
	price := func(cached map[string]int) float64 {
		c := newWarmCore(t, warmRow("a"), warmRow("b"))
		c.Track(0, Request{RID: "r", InputLen: 1000, WantedLen: 10, CachedTokens: cached})
		_, s, _ := c.ctl.hist.since(-1)
		return s
	}
	cold, warm := price(nil), price(map[string]int{"b": 960})
	if want := c0(t).ctl.meanPrefill(1000); cold != want {
		t.Fatalf("cold arrival priced %g, want the fleet-mean cold price %g", cold, want)
	}
	if !(warm < cold) {
		t.Errorf("arrival with b holding 960 tokens priced %g, cold %g: want the warm price", warm, cold)
	}
}

func c0(t *testing.T) *Core { return newWarmCore(t, warmRow("a"), warmRow("b")) }

// Evidence replaced before placement (residency lost while the request
// waited) prices the placement with what is resident now, and the step
// log records the change once, so a replay takes the same path.
func TestSetCacheEvidenceBeforePlacement(t *testing.T) {
	c := newWarmCore(t, warmRow("a"), warmRow("b"))
	var steps []Step
	c.Record(func(s Step) { steps = append(steps, s) })
	c.Track(0, Request{RID: "r", InputLen: 1000, WantedLen: 10, CachedTokens: map[string]int{"b": 960}})
	c.SetCacheEvidence("r", map[string]int{"b": 960}) // unchanged: not recorded
	c.SetCacheEvidence("r", nil)                      // b's residency was lost
	pl, ref := c.Place(0, "r", nil, First)
	if ref != nil || pl.IID != "a" || pl.Warm != nil {
		t.Fatalf("placed on %s warm %+v (%v), want a priced cold", pl.IID, pl.Warm, ref)
	}
	var kinds []StepKind
	for _, s := range steps {
		kinds = append(kinds, s.Kind)
	}
	if len(kinds) != 3 || kinds[1] != StepCacheEvidence || steps[1].Cached != nil {
		t.Errorf("steps %v, want track, cache_evidence (none), place", kinds)
	}
}
