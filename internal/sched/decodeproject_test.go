package sched

import (
	"fmt"
	"math"
	"testing"
)

func TestTPOTTarget(t *testing.T) {
	cases := []struct {
		name       string
		wanted     int
		aggregated bool
		want       float64
	}{
		{"uncapped: the target", 0, false, 0.05},
		{"one token: no gap to price", 1, false, 0.05},
		// Two tokens: a wait for the step in flight, the first token and
		// the second span three intervals over one gap.
		{"two tokens", 2, false, 0.05 / 3},
		{"nine tokens", 9, false, 0.05 * 8 / 10},
		{"aggregated: no handoff", 9, true, 0.05},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, "p0:prefill", "d0:decode")
			c.opt.Aggregated = tc.aggregated
			if got := c.tpotTarget(&Request{WantedLen: tc.wanted}); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("target %.6f, want %.6f", got, tc.want)
			}
		})
	}
}

func TestWaterLevel(t *testing.T) {
	cases := []struct {
		name      string
		base, inc []float64
		legs      int
		want      float64
	}{
		// One leg lifts the lowest engine by its step and stays below the next.
		{"lowest first", []float64{0.03, 0.01}, []float64{0.01, 0.01}, 1, 0.02},
		// Three legs: the low engine to 0.03, then both by half a leg each.
		{"spills over", []float64{0.01, 0.03}, []float64{0.01, 0.01}, 3, 0.035},
		// A steeper engine takes fewer legs for the same rise.
		{"unequal steps", []float64{0.01, 0.01}, []float64{0.01, 0.03}, 4, 0.04},
		{"one engine", []float64{0.02}, []float64{0.005}, 2, 0.03},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var order []int
			if got := waterLevel(tc.base, tc.inc, tc.legs, &order); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("level %.6f, want %.6f", got, tc.want)
			}
		})
	}
}

// The decode check prices the batch a request will meet: the requests
// admitted before it and still in prefill reach the decode pool first.
// Legs of 10,000 tokens add 0.01 s each to row's 0.01 s decode floor.
func TestDecodeCheckCountsLegsInPrefill(t *testing.T) {
	cases := []struct {
		name       string
		decode     []string // the decode engines
		inPrefill  int      // legs of 10,000 tokens placed before it
		aggregated bool
		want       string // "" admitted, else the cause
	}{
		{"an empty pool takes it", []string{"d0"}, 0, false, ""},
		{"two legs ahead leave room", []string{"d0"}, 2, false, ""},
		// Four legs ahead take d0 to 0.05 s: the target, before this one.
		{"four legs ahead fill the pool", []string{"d0"}, 4, false, CauseTPOT},
		{"two decode engines share them", []string{"d0", "d1"}, 4, false, ""},
		// Aggregated, each leg decodes where it prefills (p0, outside the
		// decode pool): nothing is projected.
		{"aggregated: on their producers", []string{"d0"}, 4, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs := []string{"p0:prefill"}
			for _, d := range tc.decode {
				specs = append(specs, d+":decode")
			}
			c := newCore(t, specs...)
			c.opt.Aggregated = tc.aggregated
			for k := 0; k < tc.inPrefill; k++ {
				id := fmt.Sprintf("ahead%d", k)
				c.Track(0, req(id, 10000, 100))
				c.dispatched(0, "p0", id, Prefill)
			}
			c.Track(0, req("r", 100, 100))
			got := ""
			if ref := c.admitDecode(c.requests["r"]); ref != nil {
				got = ref.Cause
			}
			if got != tc.want {
				t.Errorf("decode check %q, want %q", got, tc.want)
			}
		})
	}
}

// A request's own TPOT carries its wait for the decode engine's step in
// flight and its first step: with few output tokens the interval must stay
// further under the target.
func TestDecodeCheckPricesTheHandoff(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	// 20k resident tokens: d0's interval is 0.03 s, under the 0.05 s target.
	c.Track(0, req("resident", 20000, 8))
	c.dispatched(0, "d0", "resident", Decode)
	cases := []struct {
		wanted int
		want   string
	}{
		{1000, ""},     // target 0.05 × 999 ÷ 1001 ≈ 0.0499 s
		{0, ""},        // uncapped: no count to spread the handoff over
		{4, CauseTPOT}, // five intervals over three gaps: target 0.03 s, and r lifts d0 above it
		{2, CauseTPOT}, // three intervals over one gap: target 0.0167 s
	}
	for _, tc := range cases {
		r := &Request{RID: fmt.Sprint("r", tc.wanted), InputLen: 100, WantedLen: tc.wanted}
		got := ""
		if ref := c.admitDecode(r); ref != nil {
			got = ref.Cause
		}
		if got != tc.want {
			t.Errorf("wanted %d tokens: decode check %q, want %q", tc.wanted, got, tc.want)
		}
	}
}
