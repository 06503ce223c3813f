package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/narwhal-go/narwhal/internal/ports"
)

// Sessions generates a shared-prefix workload: multi-turn conversations,
// each opened on one of a few long system prompts. Turn t's prompt is the
// system prompt, every earlier turn's question and answer, and a new
// question, so it shares everything but the new question with turn t−1.
type Sessions struct {
	DurationS float64 `json:"duration_s"` // sessions start within this window
	Systems   int     `json:"systems"`    // distinct system prompts
	SystemLen int     `json:"system_len"` // tokens of each (rounded to whole blocks)
	TurnsMean float64 `json:"turns_mean"` // geometric number of turns per session
	ThinkS    float64 `json:"think_s"`    // mean seconds a user thinks before the next turn
	AnswerS   float64 `json:"answer_s"`   // seconds per output token before the user has the answer
	UserMean  float64 `json:"user_mean"`  // tokens of each question
	OutMean   float64 `json:"output_mean"`
	Spread    float64 `json:"spread"`
	InputMax  int     `json:"input_max"` // a session ends before its prompt would exceed this
	// NoSharing strips every prompt's sharing: the same lengths, nothing
	// in common (the workload cache-aware placement must not lose on).
	NoSharing bool `json:"no_sharing,omitempty"`
}

// SharedPrefix is the demo's shared-prefix workload over durationS.
func SharedPrefix(durationS float64) Sessions {
	return Sessions{DurationS: durationS, Systems: 4, SystemLen: 1536, TurnsMean: 6, ThinkS: 8, AnswerS: 0.05,
		UserMean: 256, OutMean: 64, Spread: 0.4, InputMax: 4096}
}

func (s Sessions) check(rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("sim: offered rate %v: pass a positive number of requests per second", rate)
	}
	if !(s.DurationS > 0) || s.Systems < 1 || s.SystemLen < 0 || !(s.TurnsMean >= 1) || s.ThinkS < 0 || s.AnswerS < 0 ||
		!(s.UserMean >= 1) || !(s.OutMean >= 1) || s.Spread < 0 || s.InputMax <= s.SystemLen {
		return fmt.Errorf("sim: sessions need a positive duration, ≥ 1 system prompt and turn, means ≥ 1 and input_max above system_len")
	}
	return nil
}

// Generate draws sessions so that turns arrive at about rate per second.
// Draws come from streams of the seed, so every rate of a sweep shares
// the same sessions (common random numbers): only session starts are
// squeezed.
func (s Sessions) Generate(rate float64, seed uint64, blockSize int) (Trace, error) {
	if err := s.check(rate); err != nil {
		return Trace{}, err
	}
	sysLen := s.SystemLen / blockSize * blockSize
	starts, draws := ports.NewSeededRng(seed), ports.NewSeededRng(seed^0x5e551075)
	tr := Trace{DurationS: s.DurationS}
	at := 0.0
	for id := 1; id < 1<<22; id++ { // bounded: 4M sessions
		at += starts.ExpFloat64() * s.TurnsMean / rate
		if at >= s.DurationS {
			break
		}
		tr.Arrivals = append(tr.Arrivals, s.session(draws, id, at, sysLen)...)
	}
	slices.SortStableFunc(tr.Arrivals, func(a, b Arrival) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return tr, nil
}

// session is one conversation's turns.
func (s Sessions) session(r ports.Rng, id int, at float64, sysLen int) []Arrival {
	system := 1 + int(r.Uint64()%uint64(s.Systems))
	history := sysLen
	var out []Arrival
	for turn := 0; turn < 64; turn++ {
		in := history + draw(r, s.UserMean, s.Spread, s.InputMax)
		outLen := draw(r, s.OutMean, s.Spread, s.InputMax)
		if in > s.InputMax {
			break
		}
		a := Arrival{At: at, InputLen: in, OutputLen: outLen}
		if !s.NoSharing {
			a.System, a.SystemLen, a.Session = system, sysLen, id
		}
		out = append(out, a)
		history = in + outLen
		if r.Float64() >= 1-1/s.TurnsMean {
			break
		}
		at += s.AnswerS*float64(outLen) + s.ThinkS*r.ExpFloat64()
	}
	return out
}
