package memory

import (
	"math"
	"slices"
)

// A band is what the plan states as 90 % sure. The range of n calibration
// entries is not that: a new run falls inside [min, max] of n exchangeable
// runs with probability (n−1)/(n+1) — a third for two entries, 82 % for
// ten — which is why logged figures fell outside the bands even when the
// point was within 0.5 %. The band is therefore the wider of the entries'
// range and the normal prediction interval for one new run,
// mean ± t(0.95, n−1) × s × √(1 + 1/n): wide when the entries are few or
// disagree (a band carried across releases whose entries differ 2.5×
// says so by its width), narrow only when many agree.

// studentT95 is the 0.95 quantile of Student's t with df = index + 1
// degrees of freedom (df 1 … 30); beyond 30 the normal's 1.645 is within
// 3 %. Standard table values.
var studentT95 = [...]float64{
	6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
	1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
	1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
}

func tQuantile95(df int) float64 {
	switch {
	case df < 1:
		return math.Inf(1)
	case df <= len(studentT95):
		return studentT95[df-1]
	default:
		return 1.645
	}
}

// predictionBand is the 90 % band for one new value given the calibration
// values xs (at least two).
func predictionBand(xs []float64) (lo, hi float64) {
	n := float64(len(xs))
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= n
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	s := math.Sqrt(ss / (n - 1))
	half := tQuantile95(len(xs)-1) * s * math.Sqrt(1+1/n)
	return min(slices.Min(xs), mean-half), max(slices.Max(xs), mean+half)
}

// predictionBandBytes is predictionBand over byte levels.
func predictionBandBytes(vs []int64) (lo, hi int64) {
	fs := make([]float64, len(vs))
	for i, v := range vs {
		fs[i] = float64(v)
	}
	l, h := predictionBand(fs)
	return int64(math.Floor(l)), int64(math.Ceil(h))
}
