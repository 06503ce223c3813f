package sched

import (
	"fmt"
	"math"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
)

func ip(v int) *int { return &v }

// row is a simple profile: prefill 1 ms per 100 tokens + 10 ms, decode
// 10 ms + 1 µs per resident KV token, at most 64 requests and 100k tokens.
func row(iid string) profile.Row {
	return profile.Row{IID: iid, TTFTB: 1e-5, TTFTC: 0.01, TPOTSlope: 1e-6, TPOTIntercept: 0.01,
		DecodeMinRequests: ip(1), DecodeMaxRequests: ip(64), DecodeMinKVTokens: ip(1), DecodeMaxKVTokens: ip(100000)}
}

// engineSpec is "iid:role" with an optional "!" suffix for pinned.
func newCore(t testing.TB, specs ...string) *Core {
	t.Helper()
	cfg := fleet.Defaults()
	cfg.Model = "m"
	cfg.SLO = fleet.SLO{TTFT: 1, TPOT: 0.05}
	store := &profile.Store{Schema: profile.Schema, SchemaVersion: 1}
	for _, s := range specs {
		var iid, role string
		pin := false
		if s[len(s)-1] == '!' {
			pin, s = true, s[:len(s)-1]
		}
		for k := range s {
			if s[k] == ':' {
				iid, role = s[:k], s[k+1:]
			}
		}
		cfg.Engines = append(cfg.Engines, fleet.Engine{IID: iid, URL: "http://127.0.0.1:1", Role: fleet.Role(role), Pin: pin})
		store.Profiles = append(store.Profiles, row(iid))
	}
	c, err := New(&cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func req(rid string, in, want int) Request { return Request{RID: rid, InputLen: in, WantedLen: want} }

func TestNewRequiresEveryProfile(t *testing.T) {
	cfg := fleet.Defaults()
	cfg.Engines = []fleet.Engine{{IID: "a", Role: fleet.Prefill}}
	if _, err := New(&cfg, &profile.Store{}); err == nil {
		t.Fatal("want an error for an engine without a profile row")
	}
}

func TestPrefillPlacement(t *testing.T) {
	cases := []struct {
		name     string
		engines  []string
		setup    func(c *Core)
		exclude  []string
		want     string
		fallback bool
		cause    string
	}{
		{name: "lowest iid on a tie", engines: []string{"p1:prefill", "p0:prefill", "d0:decode"}, want: "p0"},
		{name: "shorter queue wins", engines: []string{"p0:prefill", "p1:prefill", "d0:decode"},
			setup: func(c *Core) { c.Track(0, req("x", 4000, 8)); c.dispatched(0, "p0", "x", Prefill) }, want: "p1"},
		{name: "less decode KV wins before queue length", engines: []string{"p0:prefill", "p1:prefill", "d0:decode"},
			setup: func(c *Core) {
				c.Track(0, req("q", 100, 8))
				c.dispatched(0, "p1", "q", Prefill)
				c.Track(0, req("d", 100, 8))
				c.dispatched(0, "p0", "d", Decode)
			}, want: "p1"},
		{name: "exclusions", engines: []string{"p0:prefill", "p1:prefill"}, exclude: []string{"p0"}, want: "p1"},
		{name: "dead engines are skipped", engines: []string{"p0:prefill", "p1:prefill"}, setup: func(c *Core) { c.SetLive("p0", false) }, want: "p1"},
		{name: "aggregate fallback takes unpinned engines", engines: []string{"p0:prefill", "d0:decode!", "d1:decode"},
			exclude: []string{"p0"}, want: "d1", fallback: true},
		{name: "every fallback candidate pinned", engines: []string{"p0:prefill", "d0:decode!"}, exclude: []string{"p0"}, cause: CauseNoEngine},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, tc.engines...)
			if tc.setup != nil {
				tc.setup(c)
			}
			c.Track(0, req("r", 1000, 16))
			ex := map[string]bool{}
			for _, e := range tc.exclude {
				ex[e] = true
			}
			p, ref := c.Place(0, "r", ex, First)
			if tc.cause != "" {
				if ref == nil || ref.Cause != tc.cause {
					t.Fatalf("refusal = %+v, want cause %s", ref, tc.cause)
				}
				return
			}
			if ref != nil {
				t.Fatalf("refused: %+v", ref)
			}
			if p.IID != tc.want || p.Fallback != tc.fallback {
				t.Errorf("placed on %s (fallback %v), want %s (fallback %v)", p.IID, p.Fallback, tc.want, tc.fallback)
			}
		})
	}
}

func TestPrefillCostPair(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.Track(0, req("a", 2000, 8))
	c.dispatched(0, "p0", "a", Prefill)
	c.Track(0, req("b", 500, 8))
	c.dispatched(0, "p0", "b", Decode)
	c.OutputTokens(1, "p0", "b", 3)
	r := req("r", 1000, 8)
	got := c.PrefillCost(&r, c.Instance("p0"))
	wantSecondary := (0.01 + 2000e-5) + (0.01 + 1000e-5)
	if got.Primary != 503 || math.Abs(got.Secondary-wantSecondary) > 1e-12 {
		t.Errorf("cost = %+v, want (503, %v)", got, wantSecondary)
	}
	c.Instance("p0").Probation = true
	if k := c.PrefillCost(&r, c.Instance("p0")); math.Abs(k.Secondary-wantSecondary-1.5) > 1e-12 {
		t.Errorf("probation penalty not added: %+v", k)
	}
}

func TestDecodeCostPair(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	r := c.Track(0, req("r", 1000, 8))
	got := c.DecodeCost(r, c.Instance("d0"))
	// MT(0.05, 1) = (0.05 - 0.01) / 1e-6 = 40000, capped at 100000 → 40000.
	if got.Primary != 0 || math.Abs(got.Secondary-(1000-40000)) > 1e-6 {
		t.Errorf("cost = %+v, want (0, -39000)", got)
	}
}

func TestDecodeAvoidsProducer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engines []string
		want    string
	}{
		{"crossed when another decode engine exists", []string{"p0:prefill", "d0:decode", "d1:decode"}, "d0"},
		{"producer moved into the decode pool is avoided", []string{"d0:decode", "d1:decode"}, "d1"},
		{"producer alone decodes", []string{"d0:decode"}, "d0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, tc.engines...)
			c.Track(0, req("r", 100, 8))
			producer := "p0"
			if c.Instance("p0") == nil {
				producer = "d0"
			}
			c.dispatched(0, producer, "r", Prefill)
			c.PrefillDone(0.1, producer, "r")
			p, ref := c.PlaceDecode(0.1, "r", nil)
			if ref != nil || p.IID != tc.want {
				t.Errorf("decode on %s (%v), want %s", p.IID, ref, tc.want)
			}
		})
	}
}

func TestTTFTAdmission(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.opt.Queue = QueueLimits{} // the refusals themselves; queue_test.go has the waits
	// A 100k-token prompt alone takes 1.01 s > 1 s budget.
	c.Track(0, req("long", 100000, 8))
	if _, ref := c.Place(0, "long", nil, First); ref == nil || ref.Cause != CausePrompt || ref.RetryAfter != 0 {
		t.Errorf("long prompt: refusal %+v, want cause prompt without Retry-After", ref)
	}
	// Fill the queue with 2.5 s of work: a small request is refused for the queue.
	for k := 0; k < 5; k++ {
		id := fmt.Sprintf("q%d", k)
		c.Track(0, req(id, 49000, 8))
		c.dispatched(0, "p0", id, Prefill)
	}
	c.Track(0, req("small", 100, 8))
	_, ref := c.Place(0.2, "small", nil, First) // 0.2 s after it arrived
	if ref == nil || ref.Cause != CauseQueue || ref.RetryAfter != 2 {
		t.Errorf("deep queue: refusal %+v, want cause queue, Retry-After 2", ref)
	}
	// Open admission never refuses predictively.
	c.opt.Predictive = false
	if _, ref := c.Place(0.2, "small", nil, First); ref != nil {
		t.Errorf("open admission refused: %+v", ref)
	}
}

func TestAggregateUnpriced(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.opt.Queue = QueueLimits{} // the refusal itself; with the queue it waits
	c.SetLive("p0", false)
	c.Track(0, req("busy", 100, 8))
	c.dispatched(0, "d0", "busy", Decode)
	c.Track(0, req("r", 100, 8))
	_, ref := c.Place(0, "r", nil, First)
	if ref == nil || ref.Cause != CauseAggregateUnpriced || ref.RetryAfter != 1 {
		t.Errorf("refusal %+v, want aggregate_unpriced with Retry-After 1", ref)
	}
}

func TestDecodeAdmission(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	// Fill d0 close to its 100k-token bound.
	c.Track(0, req("big", 90000, 8))
	c.dispatched(0, "d0", "big", Decode)
	if ref := c.admitDecode(&Request{RID: "r", InputLen: 20000, WantedLen: 100}); ref == nil || ref.Cause != CauseKVCapacity {
		t.Errorf("kv: refusal %+v, want kv_capacity", ref)
	}
	c.Finished(1, "big")
	// 45k resident tokens push the interval to 0.055 s > 0.05 s target.
	c.Track(0, req("mid", 45000, 8))
	c.dispatched(1, "d0", "mid", Decode)
	if ref := c.admitDecode(&Request{RID: "r", InputLen: 1000}); ref == nil || ref.Cause != CauseTPOT {
		t.Errorf("tpot: refusal %+v, want tpot", ref)
	}
	if ref := c.admitDecode(&Request{RID: "r2", InputLen: 50000}); ref != nil {
		t.Errorf("a request that misses TPOT even alone is admitted, got %+v", ref)
	}
}

func TestEventsKeepRunningSums(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.Track(0, req("a", 100, 8))
	c.dispatched(0, "p0", "a", Prefill)
	c.PrefillDone(0.1, "p0", "a")
	c.dispatched(0.1, "d0", "a", Decode)
	c.OutputTokens(0.2, "d0", "a", 1)
	c.OutputTokens(0.25, "d0", "a", 2)
	s := c.Snapshot(0.3)
	d0 := s.Engines[0]
	if d0.IID != "d0" || d0.ResidentDecode != 1 || d0.DecodeTokens != 103 {
		t.Errorf("d0 = %+v, want one resident with 103 KV tokens", d0)
	}
	if p0 := s.Engines[1]; p0.ResidentPrefill != 0 || p0.PrefillQueueS != 0 {
		t.Errorf("p0 = %+v, want empty after prefill done", p0)
	}
	c.Finished(0.4, "a")
	s = c.Snapshot(0.4)
	if s.Engines[0].DecodeTokens != 0 || s.Tracked != 0 {
		t.Errorf("after finish: %+v", s)
	}
}

func TestDecodeLoadAndCorrection(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.Track(0, req("a", 100, 100))
	c.dispatched(0, "d0", "a", Decode)
	// Tokens every 0.04 s: floor 0.01 s, target 0.05 s → load 0.75.
	now := 0.0
	for k := 0; k < 20; k++ {
		now += 0.04
		c.OutputTokens(now, "d0", "a", 1)
	}
	if l := c.PoolLoads(now).Decode; math.Abs(l-0.75) > 1e-9 {
		t.Errorf("decode load = %v, want 0.75", l)
	}
	c.Roll(now)
	// predicted interval ≈ 0.0101; ratio ≈ 3.96 → 0.8×1 + 0.2×3.96 = 1.59.
	if corr := c.Instance("d0").correction; corr < 1.5 || corr > 1.7 {
		t.Errorf("correction = %v, want about 1.59", corr)
	}
	for k := 0; k < 30; k++ {
		for j := 0; j < 10; j++ {
			now += 0.04
			c.OutputTokens(now, "d0", "a", 1)
		}
		c.Roll(now)
	}
	if corr := c.Instance("d0").correction; corr != 2 {
		t.Errorf("correction = %v, want clamped at decode_correction_max 2", corr)
	}
}

func TestPrefillLoadIntegratesBetweenArrivals(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	c.Roll(0)
	c.Track(0, req("a", 49000, 8)) // 0.5 s of prefill
	c.dispatched(0, "p0", "a", Prefill)
	c.PrefillDone(0.5, "p0", "a")
	// Resident price is 0 now, but half of the interval held 0.5 s of work.
	if l := c.PoolLoads(1).Prefill; math.Abs(l-0.25) > 1e-9 {
		t.Errorf("prefill load = %v, want 0.25", l)
	}
}

// One prefill and one decode decision over 64 engines with 1,000 resident
// requests: the target is under 10 µs.
func BenchmarkPlace64Engines1000Resident(b *testing.B) {
	specs := make([]string, 64)
	for k := range specs {
		role := "decode"
		if k%4 == 0 {
			role = "prefill"
		}
		specs[k] = fmt.Sprintf("e%02d:%s", k, role)
	}
	c := newCore(b, specs...)
	for k := 0; k < 1000; k++ {
		id := fmt.Sprintf("r%d", k)
		c.Track(0, req(id, 500+k, 100))
		iid := fmt.Sprintf("e%02d", k%64)
		phase := Decode
		if k%64%4 == 0 {
			phase = Prefill
		}
		c.dispatched(0, iid, id, phase)
	}
	c.Track(0, req("new", 1000, 100))
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		if _, ref := c.Place(0, "new", nil, First); ref != nil {
			b.Fatal(ref)
		}
		if _, ref := c.PlaceDecode(0, "new", nil); ref != nil {
			b.Fatal(ref)
		}
	}
}

func TestAggregatedPlacement(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode", "d1:decode")
	c.opt.Aggregated = true
	c.Track(0, req("busy", 30000, 8))
	c.dispatched(0, "p0", "busy", Prefill)
	c.Track(0, req("r", 100, 8))
	p, ref := c.Place(0, "r", nil, First)
	if ref != nil || p.IID != "d0" {
		t.Fatalf("prefill on %s (%v), want d0: every engine takes both legs", p.IID, ref)
	}
	c.PrefillDone(0.1, p.IID, "r")
	if d, _ := c.PlaceDecode(0.1, "r", nil); d.IID != "d0" {
		t.Errorf("decode on %s, want the producer d0", d.IID)
	}
}

func TestPhaseSeats(t *testing.T) {
	c := newCore(t, "p0:prefill", "p1:prefill", "d0:decode")
	c.opt.PrefillSeats, c.opt.DecodeSeats = 1, 1
	c.Track(0, req("a", 100, 8))
	c.dispatched(0, "p0", "a", Prefill)
	c.Track(0, req("b", 100, 8))
	if p, ref := c.Place(0, "b", nil, First); ref != nil || p.IID != "p1" {
		t.Fatalf("with p0 at its seat: %v %+v, want p1", p.IID, ref)
	}
	c.Track(0, req("c", 100, 8))
	if _, ref := c.Place(0, "c", nil, First); ref == nil || !ref.Wait {
		t.Fatalf("every prefill seat taken: refusal %+v, want a wait", ref)
	}
	c.Track(0, req("d", 100, 8))
	c.dispatched(0, "d0", "d", Decode)
	if _, ref := c.PlaceDecode(0, "b", nil); ref == nil || !ref.Wait || ref.Cause != CauseSeats {
		t.Fatalf("decode seat taken: %+v, want a wait", ref)
	}
	c.Finished(1, "a")
	c.Track(1, req("e", 100, 8))
	if p, ref := c.Place(1, "e", nil, First); ref != nil || p.IID != "p0" {
		t.Errorf("after p0's seat freed: %v %+v", p.IID, ref)
	}
}

// A re-profiled engine is priced with its new row from the next
// placement, its correction starts again at 1, and the step is recorded;
// the same row again changes nothing.
func TestSetProfileReprices(t *testing.T) {
	c := newCore(t, "p0:prefill", "p1:prefill", "d0:decode")
	var steps []Step
	c.Record(func(s Step) { steps = append(steps, s) })
	c.Instance("p1").correction = 1.4
	fast := row("p1")
	fast.TTFTB, fast.TTFTC = 1e-6, 0.001
	c.SetProfile("p1", fast)
	c.SetProfile("p1", fast)
	c.Track(0, req("r", 1000, 16))
	p, ref := c.Place(0, "r", nil, First)
	if ref != nil || p.IID != "p1" {
		t.Fatalf("placed %+v (refused %+v), want p1: its new row prefills faster than p0's", p, ref)
	}
	if got := c.Instance("p1").correction; got != 1 {
		t.Fatalf("correction %v after a new profile, want 1", got)
	}
	if len(steps) == 0 || steps[0].Kind != StepSetProfile || steps[0].IID != "p1" || steps[0].Profile.TTFTB != 1e-6 ||
		steps[1].Kind == StepSetProfile {
		t.Fatalf("steps %+v: want one set_profile for p1 first", steps)
	}
	if c.Instance("p0").profClass == c.Instance("p1").profClass {
		t.Fatal("p0 and p1 still share a profile class")
	}
}
