package serving

import (
	"math"
	"sort"

	"github.com/narwhal-go/narwhal/internal/evidence/decision"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// Stats is what one window says about one execution.
type Stats struct {
	Offered   int `json:"offered"`
	Completed int `json:"completed"`
	Met       int `json:"met"`
	Refused   int `json:"refused"`
	Rejected  int `json:"rejected"`
	Expired   int `json:"expired"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`

	Attainment      float64 `json:"attainment"`
	AttainmentLower float64 `json:"attainment_wilson95_lower"`
	DurationS       float64 `json:"duration_s"`
	GoodputPerS     float64 `json:"goodput_per_s"`
	RatePerS        float64 `json:"offered_rate_per_s"`

	TTFT        Percentiles `json:"ttft_s"`
	TPOT        Percentiles `json:"tpot_s"`
	InputLen    Percentiles `json:"input_len"`
	OutputLen   Percentiles `json:"output_len"`
	MaxInputLen int         `json:"max_input_len"`
	MaxOutLen   int         `json:"max_output_len"`
}

// Percentiles are nearest-rank percentiles; all zero with no samples.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
}

// met is the per-request rule: the full requested output, ttft within
// the SLO, tpot null or within it.
func met(r *wrow, slo decision.SLO) bool {
	if terminals[r.terminal] != journal.TerminalCompleted || math.IsNaN(r.ttft) || r.ttft > slo.TTFTSeconds {
		return false
	}
	if !math.IsNaN(r.tpot) && slo.TPOTSeconds > 0 && r.tpot > slo.TPOTSeconds {
		return false
	}
	return r.wanted < 0 || r.out >= 0 && r.out >= r.wanted
}

// accumulate folds rows into stats; invalid requests (the client's own
// mistake) are not offers.
type accumulator struct {
	s                    Stats
	ttft, tpot, in, out  []float64
	firstArrived, lastAr map[string]float64
}

func newAccumulator() *accumulator {
	return &accumulator{firstArrived: map[string]float64{}, lastAr: map[string]float64{}}
}

func (a *accumulator) add(run string, r *wrow, slo decision.SLO) {
	term := terminals[r.terminal]
	if term == journal.TerminalInvalid {
		return
	}
	a.s.Offered++
	if c := a.count(term); c != nil {
		*c++
	}
	if met(r, slo) {
		a.s.Met++
	}
	if !math.IsNaN(r.ttft) {
		a.ttft = append(a.ttft, r.ttft)
	}
	if !math.IsNaN(r.tpot) {
		a.tpot = append(a.tpot, r.tpot)
	}
	a.in = append(a.in, float64(r.in))
	a.s.MaxInputLen = max(a.s.MaxInputLen, int(r.in))
	a.s.MaxOutLen = max(a.s.MaxOutLen, int(r.wanted), int(r.out))
	if r.out >= 0 {
		a.out = append(a.out, float64(r.out))
	}
	if f, ok := a.firstArrived[run]; !ok || r.arrived < f {
		a.firstArrived[run] = r.arrived
	}
	a.lastAr[run] = max(a.lastAr[run], r.arrived)
}

// count is the counter of a terminal outcome, nil for one not counted.
func (a *accumulator) count(term string) *int {
	switch term {
	case journal.TerminalCompleted:
		return &a.s.Completed
	case journal.TerminalRefused:
		return &a.s.Refused
	case journal.TerminalRejected:
		return &a.s.Rejected
	case journal.TerminalExpired:
		return &a.s.Expired
	case journal.TerminalFailed:
		return &a.s.Failed
	case journal.TerminalCancelled:
		return &a.s.Cancelled
	}
	return nil
}

func (a *accumulator) finish() Stats {
	s := a.s
	for run, f := range a.firstArrived {
		s.DurationS += a.lastAr[run] - f
	}
	if s.Offered > 0 {
		s.Attainment = float64(s.Met) / float64(s.Offered)
		s.AttainmentLower = wilsonLower(s.Met, s.Offered)
	}
	if s.DurationS > 0 {
		s.GoodputPerS = float64(s.Met) / s.DurationS
		s.RatePerS = float64(s.Offered) / s.DurationS
	}
	s.TTFT, s.TPOT, s.InputLen, s.OutputLen = pct(a.ttft), pct(a.tpot), pct(a.in), pct(a.out)
	return s
}

// wilsonLower is the lower bound of the 95 % Wilson score interval.
func wilsonLower(k, n int) float64 {
	const z = 1.959963984540054
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	centre := p + z*z/(2*nf)
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return math.Max(0, (centre-half)/den)
}

func pct(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Percentiles{N: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99)}
}
