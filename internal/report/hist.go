package report

import (
	"encoding/json"
	"math"
)

// Hist is a latency histogram with logarithmic buckets, 1 % wide, from
// 10 µs to about 3.3 h (longer values share the last bucket): its memory is fixed however many requests a
// journal holds, and a quantile is within 1 % of the exact nearest-rank
// value (docs/bench.md). Zero and negative values go to the first
// bucket.
type Hist struct {
	counts []uint32
	n      int
	sum    float64
	max    float64
}

const (
	histMin   = 1e-5
	histRatio = 1.01
	histSize  = 2100 // histMin·1.01^2100 ≈ 1.2e4 s
)

var logRatio = math.Log(histRatio)

func bucketOf(v float64) int {
	if v <= histMin {
		return 0
	}
	return min(histSize-1, 1+int(math.Log(v/histMin)/logRatio))
}

// upper is bucket i's upper bound, the value a quantile reports.
func upper(i int) float64 { return histMin * math.Pow(histRatio, float64(i)) }

// Add counts one value.
func (h *Hist) Add(v float64) {
	if h.counts == nil {
		h.counts = make([]uint32, histSize)
	}
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

// N is the number of values.
func (h *Hist) N() int { return h.n }

// Quantile is the nearest-rank quantile (the value at rank
// min(n−1, ⌊q·n⌋) of the sorted values) to the bucket's resolution; 0
// without values. The top quantile is the exact maximum.
func (h *Hist) Quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := min(h.n-1, int(q*float64(h.n)))
	if rank == h.n-1 {
		return h.max
	}
	seen := 0
	for i, c := range h.counts {
		seen += int(c)
		if seen > rank {
			return min(h.max, upper(i))
		}
	}
	return h.max
}

// Below is the share of values ≤ limit (to the bucket's resolution).
func (h *Hist) Below(limit float64) float64 {
	if h.n == 0 {
		return 0
	}
	b, k := bucketOf(limit), 0
	for i := 0; i <= b; i++ {
		k += int(h.counts[i])
	}
	return float64(k) / float64(h.n)
}

// CDF returns the histogram's points (value, share ≤ value) for the
// non-empty buckets, for the latency plots.
func (h *Hist) CDF() (xs, ys []float64) {
	seen := 0
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += int(c)
		xs = append(xs, min(h.max, upper(i)))
		ys = append(ys, float64(seen)/float64(h.n))
	}
	return xs, ys
}

// Summary is a histogram's quantiles, as reports print them.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_s"`
	P50  float64 `json:"p50_s"`
	P90  float64 `json:"p90_s"`
	P99  float64 `json:"p99_s"`
	Max  float64 `json:"max_s"`
}

// Summary returns the histogram's quantiles.
func (h *Hist) Summary() Summary {
	if h.n == 0 {
		return Summary{}
	}
	return Summary{N: h.n, Mean: h.sum / float64(h.n), P50: h.Quantile(0.5), P90: h.Quantile(0.9),
		P99: h.Quantile(0.99), Max: h.max}
}

// MarshalJSON writes the summary: a histogram's buckets are an internal
// detail.
func (h *Hist) MarshalJSON() ([]byte, error) { return json.Marshal(h.Summary()) }
