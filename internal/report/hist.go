package report

import (
	"encoding/json"
	"math"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Hist is a latency histogram: an HDR histogram (HdrHistogram/hdrhistogram-go)
// of microseconds from 1 µs to 2.8 h at three significant digits, so its
// memory is fixed however many requests a journal holds (about 200 KiB)
// and a quantile is within 0.1 % (and 1 µs) of the exact nearest-rank
// value (docs/bench.md). Longer values count as 2.8 h; zero and negative
// ones as 0. The maximum is kept exactly beside it.
type Hist struct {
	h   *hdrhistogram.Histogram
	n   int
	sum float64
	max float64
}

const (
	histMaxMicros = 10_000_000_000 // 2.8 h
	histDigits    = 3              // relative error ≤ 10^-3
)

func micros(v float64) int64 {
	return min(histMaxMicros, max(0, int64(math.Round(v*1e6))))
}

// Add counts one value.
func (h *Hist) Add(v float64) {
	if h.h == nil {
		h.h = hdrhistogram.New(1, histMaxMicros, histDigits)
	}
	_ = h.h.RecordValue(micros(v)) // in range by construction
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

// N is the number of values.
func (h *Hist) N() int { return h.n }

// Quantile is the nearest-rank quantile (the value at rank
// min(n−1, ⌊q·n⌋) of the sorted values) to the histogram's resolution
// (the highest value equivalent to it); 0 without values. The top
// quantile is the exact maximum.
func (h *Hist) Quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := min(h.n-1, int(q*float64(h.n)))
	if rank == h.n-1 {
		return h.max
	}
	// The library's percentile p selects the value at count ⌊p/100·n+½⌋:
	// p = 100·(rank+1)/n is the one at the nearest rank.
	v := h.h.ValueAtPercentile(100 * float64(rank+1) / float64(h.n))
	return min(h.max, float64(v)/1e6)
}

// Below is the share of values ≤ limit (to the histogram's resolution).
func (h *Hist) Below(limit float64) float64 {
	if h.n == 0 {
		return 0
	}
	l, k := micros(limit), int64(0)
	for _, b := range h.h.Distribution() {
		if b.From > l {
			break
		}
		k += b.Count
	}
	return float64(k) / float64(h.n)
}

// CDF returns the histogram's points (value, share ≤ value) for the
// non-empty buckets, for the latency plots.
func (h *Hist) CDF() (xs, ys []float64) {
	if h.n == 0 {
		return nil, nil
	}
	seen := int64(0)
	for _, b := range h.h.Distribution() {
		if b.Count == 0 {
			continue
		}
		seen += b.Count
		xs = append(xs, min(h.max, float64(b.To)/1e6))
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
