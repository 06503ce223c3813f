package sched

import (
	"math"
	"testing"
)

func TestPaceResidual(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Pace
		want float64
		ok   bool
	}{
		{"idle", Pace{Expected: 0.01}, 0, false},
		{"resident but no token yet", Pace{Resident: 1, Expected: 0.01}, 0, false},
		{"on pace", Pace{Resident: 1, MeanGap: 0.01, Gaps: 5, StalledGap: 0.004, Expected: 0.01}, 1, true},
		{"slow", Pace{Resident: 1, MeanGap: 0.04, Gaps: 5, Expected: 0.01}, 4, true},
		{"stalled: no gaps, a long silence", Pace{Resident: 2, StalledGap: 0.5, Expected: 0.01}, 50, true},
		{"no expectation", Pace{Resident: 1, MeanGap: 0.01, Gaps: 1}, 0, false},
	} {
		got, ok := tc.p.Residual()
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: residual %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDecodePaceReadsTheClosingInterval(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode", "d1:decode")
	c.Track(0, req("a", 100, 100))
	c.dispatched(0, "d0", "a", Decode)
	now := 0.0
	for k := 0; k < 10; k++ { // a token every 40 ms on d0
		now += 0.04
		c.OutputTokens(now, "d0", "a", 1)
	}
	paces := c.DecodePace(now + 0.1)
	d0, d1 := paces[0], paces[1]
	if d0.IID != "d0" || d0.Resident != 1 || d0.Gaps != 9 || math.Abs(d0.MeanGap-0.04) > 1e-9 ||
		math.Abs(d0.StalledGap-0.1) > 1e-9 || d0.PrefillPaused {
		t.Errorf("d0 pace %+v", d0)
	}
	// profile: 10 ms + 1 µs × 110 KV tokens.
	if want := 0.01 + 1e-6*110; math.Abs(d0.Expected-want) > 1e-12 {
		t.Errorf("expected interval %v, want %v", d0.Expected, want)
	}
	if _, ok := d1.Residual(); ok || d1.Resident != 0 {
		t.Errorf("idle d1 pace %+v scores", d1)
	}
	c.Roll(now)
	if p := c.DecodePace(now)[0]; p.Gaps != 0 {
		t.Errorf("after Roll the interval is empty, got %+v", p)
	}
	c.Track(now, req("b", 100, 8))
	c.dispatched(now, "p0", "b", Prefill)
	if p := c.DecodePace(now)[2]; !p.PrefillPaused {
		t.Errorf("p0 holds prefill work: %+v", p)
	}
}

// Probation adds probation_penalty_s to prefill prices and the penalty in
// tokens (÷ slo.tpot_s) to decode prices.
func TestProbationPenaltyPrices(t *testing.T) {
	c := newCore(t, "p0:prefill", "d0:decode")
	r := c.Track(0, req("a", 100, 8))
	p, d := c.PrefillCost(r, c.Instance("p0")), c.DecodeCost(r, c.Instance("d0"))
	c.SetProbation("p0", true)
	c.SetProbation("d0", true)
	pen := c.opt.ProbationPenaltyS
	if got := c.PrefillCost(r, c.Instance("p0")).Secondary - p.Secondary; math.Abs(got-pen) > 1e-9 {
		t.Errorf("prefill penalty %v, want %v", got, pen)
	}
	if got := c.DecodeCost(r, c.Instance("d0")).Secondary - d.Secondary; math.Abs(got-pen/c.opt.TPOT) > 1e-9 {
		t.Errorf("decode penalty %v, want %v tokens", got, pen/c.opt.TPOT)
	}
	c.SetProbation("d0", false)
	if got := c.DecodeCost(r, c.Instance("d0")); got != d {
		t.Errorf("off probation: %+v, want %+v", got, d)
	}
}
