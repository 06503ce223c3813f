package sched

import (
	"math"
	"testing"
)

// addGap keeps finite non-negative gaps, weighted by their tokens, and
// drops negatives, infinities and NaN, bit for bit as the plain formula
// (Σ perToken × n over the kept gaps).
func TestWindowAddGap(t *testing.T) {
	gaps := []struct {
		perToken float64
		n        int
	}{
		{0.03, 1}, {0.1, 3}, {-0.01, 1}, {math.Inf(1), 1}, {math.Inf(-1), 2}, {math.NaN(), 1},
		{0, 1}, {math.Copysign(0, -1), 1}, {1.0 / 3, 1}, {0.07, 2}, {math.MaxFloat64 / 1e300, 1},
	}
	var w window
	sum, tokens := 0.0, 0
	for _, g := range gaps {
		w.addGap(g.perToken, g.n)
		if g.perToken >= 0 && !math.IsInf(g.perToken, 0) && !math.IsNaN(g.perToken) {
			sum += g.perToken * float64(g.n)
			tokens += g.n
		}
		if w.gapSum != sum || w.gapTokens != tokens {
			t.Fatalf("after gap %v×%d: window sum %v over %d tokens, want %v over %d", g.perToken, g.n, w.gapSum, w.gapTokens, sum, tokens)
		}
	}
	if tokens != 10 {
		t.Fatalf("kept %d tokens, want 10: the table lost its finite gaps", tokens)
	}
}
