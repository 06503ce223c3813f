package memory

import (
	"math/rand/v2"
	"testing"
)

// The stated band covers a new run about 90 % of the time whatever the
// number of calibration entries; the entries' range alone covers
// (n−1)/(n+1) of them. Normal draws from a fixed seed, 20,000 trials per n.
func TestPredictionBandCoversNinetyPercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	for _, n := range []int{2, 3, 5, 10, 25} {
		const trials = 20000
		var inBand, inRange int
		xs := make([]float64, n)
		for range trials {
			for i := range xs {
				xs[i] = 10 + rng.NormFloat64()
			}
			next := 10 + rng.NormFloat64()
			lo, hi := predictionBand(xs)
			if next >= lo && next <= hi {
				inBand++
			}
			if next >= minOf(xs) && next <= maxOf(xs) {
				inRange++
			}
		}
		band, rangeOnly := float64(inBand)/trials, float64(inRange)/trials
		t.Logf("n=%2d: band covers %.3f, the entries' range %.3f", n, band, rangeOnly)
		// At least 90 %; above it only where the entries' range alone
		// already covers more (the band is the wider of the two).
		if band < 0.885 || band > max(0.93, rangeOnly+0.02) {
			t.Errorf("n=%d: the band covers %.3f of new runs, want about 0.90 (range alone %.3f)", n, band, rangeOnly)
		}
	}
}

func TestPredictionBandOfAgreeingEntriesIsTheirValue(t *testing.T) {
	lo, hi := predictionBandBytes([]int64{5 << 30, 5 << 30, 5 << 30})
	if lo != 5<<30 || hi != 5<<30 {
		t.Fatalf("agreeing entries: [%d, %d], want both %d", lo, hi, int64(5<<30))
	}
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
