package ui

import (
	"math"
	"time"

	"github.com/narwhal-go/narwhal/internal/metrics"
)

// sample is the cumulative state the windows difference: outcome counts
// and the latency histograms at one instant.
type sample struct {
	at                 time.Time
	ended, met, served int
	ttft, tpot         metrics.Histogram
}

// ring keeps the latest samples, oldest first, at most cap(s) of them.
type ring struct{ s []sample }

func (r *ring) add(s sample, limit int) {
	if len(r.s) >= limit {
		copy(r.s, r.s[1:])
		r.s = r.s[:len(r.s)-1]
	}
	r.s = append(r.s, s)
}

// since is the oldest sample at or after t, else the oldest there is.
func (r *ring) since(t time.Time) sample {
	for _, s := range r.s {
		if !s.at.Before(t) {
			return s
		}
	}
	return r.s[0]
}

// Quantiles are latency percentiles in seconds; nil when the window saw
// no request.
type Quantiles struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
}

// Window summarises the requests that ended within a span of time.
type Window struct {
	Seconds float64 `json:"seconds"` // span the samples actually cover
	Ended   int     `json:"ended"`
	// Attainment is the share of ended requests that met both targets;
	// nil when none ended.
	Attainment *float64  `json:"attainment"`
	Goodput    float64   `json:"goodput_rps"` // requests within SLO per second
	Throughput float64   `json:"served_rps"`
	TTFT       Quantiles `json:"ttft_s"`
	TPOT       Quantiles `json:"tpot_s"`
}

// window compares two samples.
func window(a, b sample) Window {
	w := Window{Seconds: b.at.Sub(a.at).Seconds(), Ended: b.ended - a.ended}
	if w.Ended > 0 {
		att := float64(b.met-a.met) / float64(w.Ended)
		w.Attainment = &att
	}
	if w.Seconds > 0 {
		w.Goodput = float64(b.met-a.met) / w.Seconds
		w.Throughput = float64(b.served-a.served) / w.Seconds
	}
	w.TTFT = quantiles(a.ttft, b.ttft)
	w.TPOT = quantiles(a.tpot, b.tpot)
	return w
}

func quantiles(a, b metrics.Histogram) Quantiles {
	return Quantiles{P50: quantile(0.5, a, b), P95: quantile(0.95, a, b), P99: quantile(0.99, a, b)}
}

// quantile is Prometheus's histogram_quantile over the observations
// between two reads of one histogram: linear within the bucket that holds
// the rank, the highest finite bound when the rank falls past it.
func quantile(q float64, a, b metrics.Histogram) *float64 {
	total := float64(b.Count - a.Count)
	if total <= 0 || len(b.Bounds) == 0 {
		return nil
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, ub := range b.Bounds {
		cum := float64(b.Counts[i])
		if len(a.Counts) == len(b.Counts) {
			cum -= float64(a.Counts[i])
		}
		if cum >= rank {
			v := lower
			if in := cum - below; in > 0 {
				v += (ub - lower) * (rank - below) / in
			}
			return &v
		}
		lower, below = ub, cum
	}
	v := b.Bounds[len(b.Bounds)-1]
	return &v
}

// Point is one step of the charts' series.
type Point struct {
	AgoS       float64  `json:"ago_s"`
	TTFTP95    *float64 `json:"ttft_p95_s"`
	TPOTP95    *float64 `json:"tpot_p95_s"`
	Attainment *float64 `json:"attainment"`
	Goodput    float64  `json:"goodput_rps"`
}

// series cuts the ring into steps of step, newest last.
func (r *ring) series(step time.Duration) []Point {
	out := []Point{}
	if len(r.s) < 2 {
		return out
	}
	last := r.s[len(r.s)-1]
	var prev *sample
	for i := range r.s {
		s := r.s[i]
		if prev != nil && s.at.Sub(prev.at) < step && i != len(r.s)-1 {
			continue
		}
		if prev != nil {
			w := window(*prev, s)
			out = append(out, Point{AgoS: math.Round(last.at.Sub(s.at).Seconds()), TTFTP95: w.TTFT.P95,
				TPOTP95: w.TPOT.P95, Attainment: w.Attainment, Goodput: w.Goodput})
		}
		prev = &r.s[i]
	}
	return out
}
