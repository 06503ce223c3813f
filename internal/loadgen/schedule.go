package loadgen

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/narwhal-go/narwhal/internal/sim"
)

// MaxOffers bounds one run's schedule, whatever the flags ask.
const MaxOffers = 1_000_000

// Offer is one scheduled request: At seconds after the run's start.
type Offer struct {
	At        float64
	Step      int
	InputLen  int
	OutputLen int
}

// Schedule is a run's fixed list of offers and the steps they belong to.
type Schedule struct {
	Source string
	Steps  []Step
	Offers []Offer
}

// Dist is a length distribution: log-normal around Mean with σ = Spread
// (0: always Mean), clamped to [1, Max].
type Dist struct {
	Mean   float64
	Spread float64
	Max    int
}

// ParseDist reads "N" (always N tokens) or "lognormal:MEAN:SIGMA[:MAX]"
// (MAX defaults to 8×MEAN).
func ParseDist(s string) (Dist, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return Dist{}, fmt.Errorf("length %q: use a positive token count", s)
		}
		return Dist{Mean: float64(n), Max: n}, nil
	}
	parts := strings.Split(s, ":")
	if parts[0] != "lognormal" || len(parts) < 3 || len(parts) > 4 {
		return Dist{}, fmt.Errorf("length %q: use N or lognormal:MEAN:SIGMA[:MAX]", s)
	}
	mean, err1 := strconv.ParseFloat(parts[1], 64)
	sigma, err2 := strconv.ParseFloat(parts[2], 64)
	d := Dist{Mean: mean, Spread: sigma, Max: int(math.Ceil(8 * mean))}
	var err3 error
	if len(parts) == 4 {
		d.Max, err3 = strconv.Atoi(parts[3])
	}
	if err1 != nil || err2 != nil || err3 != nil || !(mean >= 1) || !(sigma >= 0) || d.Max < 1 || math.IsInf(mean, 0) {
		return Dist{}, fmt.Errorf("length %q: MEAN ≥ 1, SIGMA ≥ 0 and MAX ≥ 1 are numbers", s)
	}
	return d, nil
}

// Poisson is the sweep's schedule: for each rate, Poisson arrivals for
// durationS seconds, one step after another. The lengths come from the
// simulator's generator (sim.Generate), so the same flags give the trace
// narwhal demo would simulate; every step shares the seed's draws.
func Poisson(rates []float64, durationS float64, in, out Dist, seed uint64) (Schedule, error) {
	seg := sim.Segment{Name: "bench", DurationS: durationS, InputMean: in.Mean, OutputMean: out.Mean,
		Spread: in.Spread, InputMax: in.Max, OutputMax: out.Max}
	s := Schedule{Source: "poisson"}
	if len(rates) > 1 {
		s.Source = "sweep"
	}
	if in.Spread != out.Spread {
		return Schedule{}, fmt.Errorf("--prompt-tokens and --output-tokens need the same SIGMA (the simulator's generator draws both with one spread)")
	}
	total := 0.0
	for _, rate := range rates {
		total += rate * durationS
	}
	if total > MaxOffers {
		return Schedule{}, fmt.Errorf("the schedule would offer about %.0f requests, over the bound of %d: lower the rate or the duration", total, MaxOffers)
	}
	for _, rate := range rates {
		tr, err := sim.Generate([]sim.Segment{seg}, rate, seed)
		if err != nil {
			return Schedule{}, err
		}
		if err := s.add(rate, tr); err != nil {
			return Schedule{}, err
		}
	}
	return s, nil
}

// Replay is a trace's schedule, once per rate (the trace's own rate when
// rates is empty), its clock scaled as narwhal demo --trace scales it.
func Replay(tr sim.Trace, rates []float64) (Schedule, error) {
	s := Schedule{Source: "trace"}
	if len(rates) == 0 {
		return s, s.add(tr.Rate(), tr)
	}
	for _, rate := range rates {
		if err := s.add(rate, tr.Scaled(rate)); err != nil {
			return Schedule{}, err
		}
	}
	return s, nil
}

func (s *Schedule) add(rate float64, tr sim.Trace) error {
	if len(s.Offers)+len(tr.Arrivals) > MaxOffers {
		return fmt.Errorf("the schedule offers more than %d requests: lower the rate or the duration", MaxOffers)
	}
	start := 0.0
	if n := len(s.Steps); n > 0 {
		start = s.Steps[n-1].StartS + s.Steps[n-1].DurationS
	}
	step := len(s.Steps)
	s.Steps = append(s.Steps, Step{Rate: rate, StartS: start, DurationS: tr.DurationS, Offered: len(tr.Arrivals)})
	for _, a := range tr.Arrivals {
		s.Offers = append(s.Offers, Offer{At: start + a.At, Step: step, InputLen: a.InputLen, OutputLen: a.OutputLen})
	}
	return nil
}

// DurationS is the offer window: the end of the last step.
func (s Schedule) DurationS() float64 {
	if len(s.Steps) == 0 {
		return 0
	}
	last := s.Steps[len(s.Steps)-1]
	return last.StartS + last.DurationS
}
