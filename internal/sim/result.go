package sim

import (
	"math"
	"sort"
)

// Result is one run: one arm on one trace.
type Result struct {
	Arm  string  `json:"arm"`
	Rate float64 `json:"rate"` // the sweep's offered rate, requests per second
	// OfferedRPS is the trace's realised rate (Poisson draws wander).
	OfferedRPS float64 `json:"offered_rps"`
	Offered    int     `json:"offered"`
	Met        int     `json:"met"`
	Attainment float64 `json:"attainment"`  // met / offered
	GoodputRPS float64 `json:"goodput_rps"` // met / offer window
	Late       int     `json:"late"`        // completed over a target
	Refused    int     `json:"refused"`     // predictive admission refused it (429)
	// RefusedBy counts refusals and placement failures by sched cause.
	RefusedBy  map[string]int `json:"refused_by"`
	Failed     int            `json:"failed"`     // no engine (503) or it can never fit an engine
	Unfinished int            `json:"unfinished"` // still open when the drain bound ended the run
	TTFTMiss   int            `json:"ttft_miss"`  // completed over the TTFT target
	TPOTMiss   int            `json:"tpot_miss"`  // completed over the TPOT target
	TTFTP50    float64        `json:"ttft_p50_s"` // over completed requests
	TTFTP99    float64        `json:"ttft_p99_s"`
	TPOTP50    float64        `json:"tpot_p50_s"`
	TPOTP99    float64        `json:"tpot_p99_s"`

	Flips       int            `json:"flips"`        // role changes seen
	Reversals   int            `json:"reversals"`    // flips undoing that engine's previous flip
	PinnedMoves int            `json:"pinned_moves"` // flips of pinned engines (must be 0)
	Decisions   int            `json:"decisions"`    // controller evaluations Tick returned
	ByResult    map[string]int `json:"decisions_by_result"`
	MinPrefill  int            `json:"min_prefill"` // smallest prefill pool seen
	MinDecode   int            `json:"min_decode"`
	Splits      []Split        `json:"splits"` // the split over time, from the start
	Preemptions int            `json:"preemptions"`
	SimulatedS  float64        `json:"simulated_s"`

	ttfts, tpots []float64
}

// Split is the pool sizes from At on.
type Split struct {
	At      float64 `json:"at"`
	Prefill int     `json:"prefill"`
	Decode  int     `json:"decode"`
}

// PrefillAt is the prefill pool size at t seconds.
func (r *Result) PrefillAt(t float64) int {
	p := 0
	for _, s := range r.Splits {
		if s.At > t {
			break
		}
		p = s.Prefill
	}
	return p
}

// MaxPrefill is the largest prefill pool in [from, to).
func (r *Result) MaxPrefill(from, to float64) int {
	best := r.PrefillAt(from)
	for _, s := range r.Splits {
		if s.At >= from && s.At < to {
			best = max(best, s.Prefill)
		}
	}
	return best
}

// finishStats fills the ratios and percentiles once the run is over.
func (r *Result) finishStats(windowS float64) {
	if r.Offered > 0 {
		r.Attainment = float64(r.Met) / float64(r.Offered)
	}
	if windowS > 0 {
		r.GoodputRPS = float64(r.Met) / windowS
		r.OfferedRPS = float64(r.Offered) / windowS
	}
	r.TTFTP50, r.TTFTP99 = quantile(r.ttfts, 0.5), quantile(r.ttfts, 0.99)
	r.TPOTP50, r.TPOTP99 = quantile(r.tpots, 0.5), quantile(r.tpots, 0.99)
	r.ttfts, r.tpots = nil, nil
}

// quantile is the nearest-rank quantile (sorted[min(n−1, ⌊q·n⌋)], as the
// journal scorer computes it); 0 for no samples.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	v := xs[min(len(xs)-1, int(q*float64(len(xs))))]
	return math.Round(v*1e6) / 1e6
}
