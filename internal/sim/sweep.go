package sim

import (
	"fmt"
	"sync"
)

// Sweep is every arm at every offered rate on one trace.
type Sweep struct {
	Fleet Fleet
	Arms  []Arm
	// Rates are offered rates in requests per second. With a replayed
	// trace they rescale its clock; empty means its native rate.
	Rates []float64
	Seed  uint64
	// Segments generate the trace at each rate (ignored with Replay).
	Segments []Segment
	// Replay is a recorded trace to run instead of generating one.
	Replay *Trace
	// Sessions generates a shared-prefix trace at each rate instead of
	// Segments (sessions.go).
	Sessions *Sessions
	// BurstS gathers a generated trace's arrivals into bursts, one every
	// BurstS seconds (Trace.Bursty); 0 leaves them Poisson.
	BurstS float64
	// Target is the attainment a rate must reach to count as sustained.
	Target float64
	// Workers run arms in parallel; results do not depend on it.
	Workers int
}

// Results is the narwhal.sim-results v1 document.
type Results struct {
	Schema        string      `json:"schema"`
	SchemaVersion int         `json:"schema_version"`
	Seed          uint64      `json:"seed"`
	Fleet         Fleet       `json:"fleet"`
	Trace         TraceInfo   `json:"trace"`
	Target        float64     `json:"target"`
	Rates         []float64   `json:"rates"`
	Arms          []ArmResult `json:"arms"`
	Comparison    Comparison  `json:"comparison"`
	// Cache pairs cache-aware arms with their cold twins (when the sweep
	// has both).
	Cache *CacheComparison `json:"cache,omitempty"`
}

// Results schema.
const (
	ResultsSchema        = "narwhal.sim-results"
	ResultsSchemaVersion = 1
)

// TraceInfo says what was offered.
type TraceInfo struct {
	Source    string    `json:"source"` // generated, sessions or replay
	BurstS    float64   `json:"burst_s,omitempty"`
	Segments  []Segment `json:"segments,omitempty"`
	Sessions  *Sessions `json:"sessions,omitempty"`
	DurationS float64   `json:"duration_s"` // at the first rate
	Requests  []int     `json:"requests"`   // per rate
}

// ArmResult is one arm across the sweep.
type ArmResult struct {
	Arm
	Runs []*Result `json:"runs"` // one per rate, in Rates order
	// SustainedRPS is the highest swept rate whose attainment reaches the
	// target; 0 when none does.
	SustainedRPS float64 `json:"sustained_rps"`
	Flips        int     `json:"flips"` // over all runs
}

// Comparison is adaptive against the best static split.
type Comparison struct {
	AdaptiveRPS   float64 `json:"adaptive_rps"`
	BestStatic    string  `json:"best_static"`
	BestStaticRPS float64 `json:"best_static_rps"`
	// Holds is whether adaptive sustains at least the best static rate.
	Holds bool `json:"holds"`
}

// Run simulates the sweep.
func (s Sweep) Run() (*Results, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	traces, info, err := s.traces()
	if err != nil {
		return nil, err
	}
	res := &Results{Schema: ResultsSchema, SchemaVersion: ResultsSchemaVersion, Seed: s.Seed, Fleet: s.Fleet,
		Trace: info, Target: s.Target, Rates: s.rates()}
	if err := s.runAll(res, traces); err != nil {
		return nil, err
	}
	for i := range res.Arms {
		res.Arms[i].summarise(res.Rates, s.Target)
	}
	res.Comparison = compare(res.Arms)
	res.Cache = compareCache(res.Arms)
	return res, nil
}

func (s Sweep) check() error {
	if len(s.Arms) == 0 {
		return fmt.Errorf("sim: a sweep needs at least one arm")
	}
	if s.Replay == nil && len(s.Rates) == 0 {
		return fmt.Errorf("sim: a generated trace needs at least one offered rate")
	}
	for _, r := range s.Rates {
		if !(r > 0) {
			return fmt.Errorf("sim: offered rate %v: rates must be positive requests per second", r)
		}
	}
	if !(s.Target > 0 && s.Target <= 1) {
		return fmt.Errorf("sim: attainment target %v must be in (0, 1]", s.Target)
	}
	return nil
}

func (s Sweep) rates() []float64 {
	if len(s.Rates) == 0 && s.Replay != nil {
		return []float64{s.Replay.Rate()}
	}
	return append([]float64(nil), s.Rates...)
}

// traces builds the trace each rate runs.
func (s Sweep) traces() ([]Trace, TraceInfo, error) {
	var out []Trace
	info := TraceInfo{Source: "generated", Segments: s.Segments, BurstS: s.BurstS}
	if s.Replay != nil {
		info = TraceInfo{Source: "replay"}
	} else if s.Sessions != nil {
		info = TraceInfo{Source: "sessions", Sessions: s.Sessions}
	}
	for _, rate := range s.rates() {
		var tr Trace
		if s.Replay != nil {
			tr = s.Replay.Scaled(rate)
		} else if s.Sessions != nil {
			var err error
			if tr, err = s.Sessions.Generate(rate, s.Seed, s.Fleet.Shape.BlockSize); err != nil {
				return nil, info, err
			}
		} else {
			var err error
			if tr, err = Generate(s.Segments, rate, s.Seed); err != nil {
				return nil, info, err
			}
			if s.BurstS > 0 {
				tr = tr.Bursty(s.BurstS)
			}
		}
		out = append(out, tr)
		info.Requests = append(info.Requests, len(tr.Arrivals))
	}
	info.DurationS = out[0].DurationS
	return out, info, nil
}

// runAll runs every (arm, rate) pair on a worker pool; each run is
// independent and lands in its own slot, so the order of completion does
// not matter.
func (s Sweep) runAll(res *Results, traces []Trace) error {
	res.Arms = make([]ArmResult, len(s.Arms))
	errs := make([]error, len(s.Arms)*len(traces))
	for i, a := range s.Arms {
		res.Arms[i] = ArmResult{Arm: a, Runs: make([]*Result, len(traces))}
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < max(1, s.Workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				a, k := j/len(traces), j%len(traces)
				r, err := Run(s.Fleet, s.Arms[a], traces[k])
				if err != nil {
					errs[j] = fmt.Errorf("arm %s at %v req/s: %w", s.Arms[a].Name, res.Rates[k], err)
					continue
				}
				r.Rate = res.Rates[k]
				res.Arms[a].Runs[k] = r
			}
		}()
	}
	for j := range errs {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *ArmResult) summarise(rates []float64, target float64) {
	for k, r := range a.Runs {
		a.Flips += r.Flips
		if r.Attainment >= target && rates[k] > a.SustainedRPS {
			a.SustainedRPS = rates[k]
		}
	}
}

// compare finds the best static split (ties to the first listed) and
// checks adaptive against it.
func compare(arms []ArmResult) Comparison {
	var c Comparison
	adaptive := false
	for _, a := range arms {
		switch {
		case a.Policy == "static" && !a.Aggregated && (c.BestStatic == "" || a.SustainedRPS > c.BestStaticRPS):
			c.BestStatic, c.BestStaticRPS = a.Name, a.SustainedRPS
		case a.Policy == "reactive":
			c.AdaptiveRPS, adaptive = a.SustainedRPS, true
		}
	}
	c.Holds = adaptive && c.BestStatic != "" && c.AdaptiveRPS >= c.BestStaticRPS
	return c
}
