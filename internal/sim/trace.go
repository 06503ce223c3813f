package sim

import (
	"fmt"
	"math"

	"github.com/narwhal-go/narwhal/internal/ports"
)

// Arrival is one request of a trace.
type Arrival struct {
	At        float64 `json:"at"` // seconds from the start of the trace
	InputLen  int     `json:"input_len"`
	OutputLen int     `json:"output_len"`
	// The prompt's sharing (prefix.go): its first SystemLen tokens are
	// system prompt System's, the rest the history of Session (0: none).
	System    int `json:"system,omitempty"`
	SystemLen int `json:"system_len,omitempty"`
	Session   int `json:"session,omitempty"`
}

// Trace is the requests a run offers, in arrival order.
type Trace struct {
	Arrivals []Arrival
	// DurationS is the offer window: rates are len(Arrivals)/DurationS.
	DurationS float64
}

// Rate is the mean offered rate in requests per second.
func (t Trace) Rate() float64 {
	if t.DurationS <= 0 {
		return 0
	}
	return float64(len(t.Arrivals)) / t.DurationS
}

// Scaled stretches or squeezes arrival times so the mean offered rate is
// rate, keeping order and lengths: how a recorded trace is swept.
func (t Trace) Scaled(rate float64) Trace {
	native := t.Rate()
	if native <= 0 || rate <= 0 {
		return t
	}
	f := native / rate
	out := Trace{Arrivals: make([]Arrival, len(t.Arrivals)), DurationS: t.DurationS * f}
	for i, a := range t.Arrivals {
		a.At *= f
		out.Arrivals[i] = a
	}
	return out
}

// Segment is a stretch of a generated trace with one length mix. Lengths
// are log-normal around their means (σ = Spread), clamped to [1, Max].
type Segment struct {
	Name       string  `json:"name"`
	DurationS  float64 `json:"duration_s"`
	InputMean  float64 `json:"input_mean"`
	OutputMean float64 `json:"output_mean"`
	Spread     float64 `json:"spread"`
	InputMax   int     `json:"input_max"`
	OutputMax  int     `json:"output_max"`
}

// MovingSegments is the demo's three-phase trace, each phase segS long:
// a balanced mix, then prefill-heavy (long prompts, a few tokens out),
// then decode-heavy (short prompts, long answers). On DemoProfile each
// phase needs about the same engine-seconds per request but a different
// split: roughly 4P4D, 7P1D and 2P6D on eight engines.
func MovingSegments(segS float64) []Segment {
	return []Segment{
		{Name: "balanced", DurationS: segS, InputMean: 512, OutputMean: 192, Spread: 0.4, InputMax: 4096, OutputMax: 1024},
		{Name: "prefill-heavy", DurationS: segS, InputMean: 1536, OutputMean: 16, Spread: 0.4, InputMax: 4096, OutputMax: 128},
		{Name: "decode-heavy", DurationS: segS, InputMean: 256, OutputMean: 512, Spread: 0.4, InputMax: 2048, OutputMax: 2048},
	}
}

// Generate draws Poisson arrivals at rate over segs. Gaps and lengths come
// from two streams of the seed, so every rate of a sweep shares the same
// draws (common random numbers): only the clock is squeezed.
func Generate(segs []Segment, rate float64, seed uint64) (Trace, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return Trace{}, fmt.Errorf("sim: offered rate %v: pass a positive number of requests per second", rate)
	}
	if len(segs) == 0 {
		return Trace{}, fmt.Errorf("sim: a generated trace needs at least one segment")
	}
	var total float64
	for i, s := range segs {
		if !(s.DurationS > 0) || !(s.InputMean >= 1) || !(s.OutputMean >= 1) || s.Spread < 0 || s.InputMax < 1 || s.OutputMax < 1 {
			return Trace{}, fmt.Errorf("sim: segment %d (%s) needs a positive duration, means ≥ 1, maxima ≥ 1 and spread ≥ 0", i, s.Name)
		}
		total += s.DurationS
	}
	gaps, lens := ports.NewSeededRng(seed), ports.NewSeededRng(seed^0x5eed1e57)
	tr := Trace{DurationS: total}
	at, seg, end := 0.0, 0, segs[0].DurationS
	for n := 0; n < 1<<26; n++ { // bounded: 64M arrivals
		at += gaps.ExpFloat64() / rate
		for seg < len(segs)-1 && at >= end {
			seg++
			end += segs[seg].DurationS
		}
		if at >= end {
			break
		}
		s := segs[seg]
		tr.Arrivals = append(tr.Arrivals, Arrival{At: at,
			InputLen:  draw(lens, s.InputMean, s.Spread, s.InputMax),
			OutputLen: draw(lens, s.OutputMean, s.Spread, s.OutputMax)})
	}
	return tr, nil
}

// draw is a log-normal length with the given mean.
func draw(r ports.Rng, mean, sigma float64, hi int) int {
	v := mean * math.Exp(sigma*r.NormFloat64()-sigma*sigma/2)
	return min(hi, max(1, int(math.Round(v))))
}

// Bursty gathers t's arrivals into bursts: every arrival of each everyS
// window arrives at the window's start, in its order (a microsecond
// apart), so the mean rate and the lengths stay t's while the load comes
// all at once, as a batch job or a retrying client fleet offers it.
func (t Trace) Bursty(everyS float64) Trace {
	out := Trace{DurationS: t.DurationS, Arrivals: make([]Arrival, len(t.Arrivals))}
	window, k := -1.0, 0
	for i, a := range t.Arrivals {
		start := math.Floor(a.At/everyS) * everyS
		if start != window {
			window, k = start, 0
		}
		a.At = start + float64(k)*1e-6
		k++
		out.Arrivals[i] = a
	}
	return out
}
