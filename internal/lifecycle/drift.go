package lifecycle

import (
	"math"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// The drift tracker is predictive health (runtime.md §3.3): an engine that
// still answers but decodes much slower than its profile says goes on
// probation (a placement penalty), and is evicted if it stays slow. It is
// deterministic: no clock, time comes in with every observation. The
// router feeds it one decode residual per live engine per monitor pass.

// baselineAlpha is the EWMA weight of a healthy window in the baseline.
const baselineAlpha = 0.25

// minVetoPeers is how many engines must score a window before a
// fleet-wide surge can veto a verdict.
const minVetoPeers = 3

// Sample is one engine's observation in one monitor pass.
type Sample struct {
	IID string
	// Residual is observed / profiled decode token interval; ignored
	// unless OK.
	Residual float64
	OK       bool
	// Paused: the engine did prefill work in the pass, so its decode gaps
	// cross a prefill boundary and are not scored.
	Paused bool
}

// DriftAction is what a closed window changed for one engine.
type DriftAction string

// Drift actions.
const (
	ProbationStarted DriftAction = "probation_started"
	ProbationEnded   DriftAction = "probation_ended"
	// Evict asks for an ejection with cause drift; the caller applies it
	// only if another live engine covers the role, and asks again on the
	// next drifting window otherwise.
	Evict DriftAction = "evict"
)

// DriftVerdict is one action for one engine, with the window's evidence.
type DriftVerdict struct {
	IID     string
	Action  DriftAction
	Score   float64 // the window's mean residual
	Band    float64 // drift_band × baseline
	Windows int     // consecutive drifting windows (healthy ones for ProbationEnded)
}

// DriftState is one engine's tracker state, for /narwhal/state and metrics.
type DriftState struct {
	Probation     bool    `json:"probation"`
	Baseline      float64 `json:"baseline"`
	Drifting      int     `json:"drifting_windows"`
	Scored        int     `json:"scored"`
	Undersampled  int     `json:"undersampled"`
	Vetoed        int     `json:"vetoed"`
	PrefillPaused bool    `json:"prefill_paused"`
	PrefillPauses int     `json:"prefill_pauses"`
	LastScore     float64 `json:"last_score"`
	LastScoredAt  float64 `json:"-"` // router seconds; 0 before the first score
}

type driftEngine struct {
	DriftState
	sum     float64 // residuals of the open window
	n       int
	healthy int // consecutive healthy windows while on probation
}

// Drift scores every engine's decode pace in windows of
// recovery.health.window_s. It has no lock: like sched's core it belongs
// to one goroutine (the supervisor's monitor pass), which publishes what
// readers need (States, Probation) as a snapshot of its own.
type Drift struct {
	cfg     fleet.Health
	start   float64 // the open window's start
	started bool
	engines map[string]*driftEngine
	order   []string
}

// NewDrift tracks the engines iids with cfg.
func NewDrift(cfg fleet.Health, iids []string) *Drift {
	d := &Drift{cfg: cfg, engines: map[string]*driftEngine{}}
	for _, iid := range iids {
		d.engines[iid] = &driftEngine{DriftState: DriftState{Baseline: 1}}
		d.order = append(d.order, iid)
	}
	sort.Strings(d.order)
	return d
}

// Observe adds one pass's samples at now (router seconds). When the open
// window has lasted window_s it is scored, and the verdicts it produced
// are returned, in iid order.
func (d *Drift) Observe(now float64, samples []Sample) []DriftVerdict {
	if !d.started {
		d.start, d.started = now, true
	}
	for _, s := range samples {
		e := d.engines[s.IID]
		if e == nil {
			continue
		}
		e.PrefillPaused = s.Paused
		switch {
		case s.Paused:
			e.PrefillPauses++
		case s.OK && s.Residual >= 0 && !math.IsInf(s.Residual, 0) && !math.IsNaN(s.Residual):
			e.sum += s.Residual
			e.n++
		}
	}
	if now-d.start < d.cfg.WindowS {
		return nil
	}
	d.start = now
	return d.closeWindow(now)
}

// windowScore is one engine's score in a closing window.
type windowScore struct {
	e           *driftEngine
	iid         string
	score, band float64
	over        bool
}

// closeWindow scores the open window of every engine and starts a
// new one.
func (d *Drift) closeWindow(now float64) []DriftVerdict {
	var scored []windowScore
	for _, iid := range d.order {
		e := d.engines[iid]
		n, sum := e.n, e.sum
		e.n, e.sum = 0, 0
		if n < d.cfg.MinSamples {
			e.Undersampled++
			continue
		}
		score := sum / float64(n)
		band := d.cfg.DriftBand * math.Max(1, e.Baseline)
		e.Scored++
		e.LastScore, e.LastScoredAt = score, now
		scored = append(scored, windowScore{e: e, iid: iid, score: score, band: band, over: score > band})
	}
	var out []DriftVerdict
	for k, w := range scored {
		switch {
		case w.over && d.vetoed(scored, k):
			w.e.Vetoed++ // a fleet-wide surge: neither drifting nor healthy
		case w.over:
			out = append(out, d.drifting(w)...)
		default:
			out = append(out, d.healthy(w)...)
		}
	}
	return out
}

// vetoed reports whether the fleet-wide surge veto spares scored[k]: at
// least minVetoPeers engines scored, at least half of its peers are over
// their own bands, and its score is within relative_band × the peers'
// median. relative_band 0 turns the veto off.
func (d *Drift) vetoed(scored []windowScore, k int) bool {
	if d.cfg.RelativeBand <= 0 || len(scored) < minVetoPeers {
		return false
	}
	var peers []float64
	over := 0
	for j, w := range scored {
		if j == k {
			continue
		}
		peers = append(peers, w.score)
		if w.over {
			over++
		}
	}
	if 2*over < len(peers) {
		return false
	}
	return scored[k].score <= d.cfg.RelativeBand*median(peers)
}

// drifting counts an over-band window: probation at probation_windows,
// an eviction request from evict_windows on.
func (d *Drift) drifting(w windowScore) []DriftVerdict {
	e := w.e
	e.Drifting++
	e.healthy = 0
	var out []DriftVerdict
	v := DriftVerdict{IID: w.iid, Score: w.score, Band: w.band, Windows: e.Drifting}
	if !e.Probation && e.Drifting >= d.cfg.ProbationWindows {
		e.Probation = true
		v.Action = ProbationStarted
		out = append(out, v)
	}
	if e.Drifting >= d.cfg.EvictWindows {
		v.Action = Evict
		out = append(out, v)
	}
	return out
}

// healthy counts a window within the band: it moves the baseline, ends
// the drifting streak, and after recovery_windows of them ends probation.
func (d *Drift) healthy(w windowScore) []DriftVerdict {
	e := w.e
	e.Baseline = baselineAlpha*w.score + (1-baselineAlpha)*e.Baseline
	e.Drifting = 0
	if !e.Probation {
		return nil
	}
	e.healthy++
	if e.healthy < d.cfg.RecoveryWindows {
		return nil
	}
	e.Probation, e.healthy = false, 0
	return []DriftVerdict{{IID: w.iid, Action: ProbationEnded, Score: w.score, Band: w.band, Windows: d.cfg.RecoveryWindows}}
}

// Reset forgets iid's streaks and probation (it left placement: an
// ejection starts it afresh on readmission); the baseline stays. It
// reports whether the engine was on probation.
func (d *Drift) Reset(iid string) bool {
	e := d.engines[iid]
	if e == nil {
		return false
	}
	was := e.Probation
	e.Probation, e.Drifting, e.healthy, e.sum, e.n, e.PrefillPaused = false, 0, 0, 0, 0, false
	return was
}

// Probation lists the engines on probation, sorted.
func (d *Drift) Probation() []string {
	out := []string{}
	for _, iid := range d.order {
		if d.engines[iid].Probation {
			out = append(out, iid)
		}
	}
	return out
}

// States returns every engine's tracker state.
func (d *Drift) States() map[string]DriftState {
	out := make(map[string]DriftState, len(d.order))
	for _, iid := range d.order {
		out[iid] = d.engines[iid].DriftState
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
