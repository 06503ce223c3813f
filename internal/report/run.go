// Package report scores what happened in a run: it reads router
// journals (a rotated set as one) and narwhal bench results, applies the
// scoring rules of operations.md §8 (attainment, goodput, refusals,
// latency against the SLO, re-roles, thrash, time to adapt, KV handoff),
// and renders the runs side by side as text, JSON, charts (PNG and SVG
// through gonum/plot) and one self-contained HTML page.
//
// Reading is streaming and its memory is bounded by the run's shape, not
// its length: latencies go to fixed-size histograms, counts to windows
// of the run's clock, so a journal of millions of rows costs one pass.
package report

import (
	"math"
	"slices"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// SLO is the target requests are scored against: the fleet's, whose Met
// is the one "SLO met" rule.
type SLO = fleet.SLO

// Run is one scored input: a journal (set) or a bench results file, or
// one arm of a simulation.
type Run struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"` // journal, bench or sim
	Files  []string `json:"files,omitempty"`
	Runs   []string `json:"runs,omitempty"` // journal run ids, bench run id
	Start  string   `json:"started,omitempty"`
	SLO    SLO      `json:"slo"`
	Target float64  `json:"target"`

	Counts   Counts         `json:"counts"`
	Refusals map[string]int `json:"refusals"` // "terminal:reason" (journal), "status code" or outcome (bench)
	// TornRows counts the journal's torn rows, skipped and not scored
	// (journal runs only; nil for the others).
	TornRows   *journal.Torn `json:"journal_torn_rows,omitempty"`
	Attainment Attainment    `json:"attainment"`
	// GoodputRPS is the highest swept rate whose attainment reaches
	// Target (0: none, or no sweep); MetRPS is met requests per second of
	// the offer window.
	GoodputRPS float64 `json:"goodput_rps"`
	MetRPS     float64 `json:"met_rps"`

	TTFT *Hist `json:"ttft"`
	TPOT *Hist `json:"tpot"`
	E2E  *Hist `json:"e2e"`

	Steps   []Step   `json:"steps,omitempty"`
	Windows []Window `json:"windows,omitempty"`
	WindowS float64  `json:"window_s"`
	WallS   float64  `json:"wall_s"`

	Control Control           `json:"control"`
	Handoff Handoff           `json:"kv_handoff"`
	Engines map[string]Engine `json:"engines,omitempty"`
	Join    *Join             `json:"join,omitempty"`

	// TTFTLate / TPOTLate count completed requests over each target.
	TTFTLate int `json:"ttft_late"`
	TPOTLate int `json:"tpot_late"`

	index *benchIndex
	// wantWindowS is the window length asked for (0: fitted to the run);
	// counting starts at 1 s (or the asked length) and coarsens.
	wantWindowS float64
	lastFlip    map[string]string
	rolesAt0    map[string]string
}

// Counts are request totals; Offered is every request the input knows.
type Counts struct {
	Offered   int            `json:"offered"`
	Sent      int            `json:"sent"`
	Completed int            `json:"completed"`
	Met       int            `json:"met"`
	Refused   int            `json:"refused"`
	ByOutcome map[string]int `json:"by_outcome"`
	// Attempts is the bench client's HTTP attempts, its SDK-style retries
	// included (0 for a journal, which sees each attempt as a request).
	Attempts int `json:"attempts"`
}

// Attainment is the share of requests that met the SLO: PerRequest is
// met / offered (refusals count as misses, the client's score);
// ExRefused is met / (offered − refused), the journal scorer's (§8.3).
type Attainment struct {
	PerRequest float64 `json:"per_request"`
	ExRefused  float64 `json:"ex_refused"`
	// Windows is the share of windows whose own attainment reaches the
	// target (the per-deployment-window view).
	Windows float64 `json:"windows_at_target"`
}

// Step is one offered rate of a sweep.
type Step struct {
	Rate       float64 `json:"rate"`
	StartS     float64 `json:"start_s"`
	DurationS  float64 `json:"duration_s"`
	Offered    int     `json:"offered"`
	Met        int     `json:"met"`
	Refused    int     `json:"refused"`
	Attainment float64 `json:"attainment"`
}

// Window is a stretch of the run's clock, WindowS long.
type Window struct {
	StartS     float64 `json:"start_s"`
	Offered    int     `json:"offered"`
	Met        int     `json:"met"`
	Refused    int     `json:"refused"`
	Attainment float64 `json:"attainment"`
	Prefill    int     `json:"prefill_engines"` // prefill pool size at the window's end (journal)
}

// Control is the role controller's activity (§8.3, §8.4).
type Control struct {
	Flips          []Flip  `json:"flips"`
	Reversals      int     `json:"reversals"`
	ReRolesPerHour float64 `json:"re_roles_per_hour"`
	ThrashPerHour  float64 `json:"thrash_per_hour"`
	// AdaptS is the median lag from a load shift (a sweep step, else one
	// of three equal phases) to the first flip after it; nil when no
	// shift was followed by a flip.
	AdaptS *float64 `json:"adapt_s"`
	Splits []Split  `json:"splits"`
}

// Flip is one applied role change.
type Flip struct {
	At  float64 `json:"at"`
	IID string  `json:"iid"`
	To  string  `json:"to"`
}

// Split is the pool sizes from At on.
type Split struct {
	At      float64 `json:"at"`
	Prefill int     `json:"prefill"`
	Decode  int     `json:"decode"`
}

// Handoff is the KV handoff time, first_byte_s − ttft_s (§8.3).
type Handoff struct {
	Crossed      *Hist   `json:"crossed"`
	Local        *Hist   `json:"local"`
	CrossedShare float64 `json:"crossed_share"`
}

// Engine is one engine's load: legs it served, and its role timeline.
type Engine struct {
	Prefill int        `json:"prefill_legs"`
	Decode  int        `json:"decode_legs"`
	Roles   []RoleSpan `json:"roles"`
}

// RoleSpan is an engine's role from At on.
type RoleSpan struct {
	At   float64 `json:"at"`
	Role string  `json:"role"`
}

// Join is how a journal's rows matched a bench's records by request id.
type Join struct {
	Bench       string `json:"bench"`
	Matched     int    `json:"matched"`      // journal rows whose client_rid is a bench record
	BenchOnly   int    `json:"bench_only"`   // bench records the router answered without a journal row
	JournalOnly int    `json:"journal_only"` // journal rows not from this bench
	NotSent     int    `json:"not_sent"`     // bench offers never sent (no row expected)
}

func newRun(name, kind string, slo SLO, target, windowS float64) *Run {
	return &Run{Name: name, Kind: kind, SLO: slo, Target: target, WindowS: max(1, windowS), wantWindowS: windowS,
		Refusals: map[string]int{}, Counts: Counts{ByOutcome: map[string]int{}},
		TTFT: &Hist{}, TPOT: &Hist{}, E2E: &Hist{}, Handoff: Handoff{Crossed: &Hist{}, Local: &Hist{}},
		Engines: map[string]Engine{}, lastFlip: map[string]string{}, rolesAt0: map[string]string{}}
}

// sloMet is the per-request SLO predicate of §8.2 (fleet.SLO.Met) for a
// completed request: the full output counts as complete.
func sloMet(s SLO, ttft, tpot *float64, outputLen, wanted int) bool {
	return s.Met(outputLen >= wanted, ttft, tpot)
}

// window returns the window holding t, growing the list as needed. The
// list never passes maxWindows: when a run outgrows it, adjacent windows
// merge and WindowS doubles, so memory stays bounded for any run length.
func (r *Run) window(t float64) *Window {
	i := max(0, int(t/r.WindowS))
	for i >= maxWindows {
		r.coarsen()
		i = max(0, int(t/r.WindowS))
	}
	for len(r.Windows) <= i {
		r.Windows = append(r.Windows, Window{StartS: float64(len(r.Windows)) * r.WindowS})
	}
	return &r.Windows[i]
}

// coarsen merges windows pairwise and doubles WindowS.
func (r *Run) coarsen() {
	r.WindowS *= 2
	out := r.Windows[:0]
	for i := 0; i < len(r.Windows); i += 2 {
		w := r.Windows[i]
		if i+1 < len(r.Windows) {
			n := r.Windows[i+1]
			w.Offered, w.Met, w.Refused = w.Offered+n.Offered, w.Met+n.Met, w.Refused+n.Refused
		}
		w.StartS = float64(len(out)) * r.WindowS
		out = append(out, w)
	}
	r.Windows = out
}

// fitWindows coarsens the counting windows to the reporting length:
// want, or when want is 0 about a thirtieth of the run, between 1 s and
// 60 s.
func (r *Run) fitWindows(want, wallS float64) {
	if want <= 0 {
		want = min(60, max(1, math.Round(wallS/30)))
	}
	for r.WindowS*2 <= want && len(r.Windows) > 1 {
		r.coarsen()
	}
}

const maxWindows = 100_000

// count adds one request's outcome to the run's totals, its window and
// step.
func (r *Run) count(at float64, step int, met, refused bool) {
	r.Counts.Offered++
	w := r.window(at)
	w.Offered++
	var s *Step
	if step >= 0 && step < len(r.Steps) {
		s = &r.Steps[step]
		s.Offered++
	}
	if met {
		r.Counts.Met++
		w.Met++
		if s != nil {
			s.Met++
		}
	}
	if refused {
		r.Counts.Refused++
		w.Refused++
		if s != nil {
			s.Refused++
		}
	}
}

// finish computes the ratios once every row is in.
func (r *Run) finish(wallS float64, shifts []float64) {
	c := r.Counts
	r.Attainment.PerRequest = ratio(c.Met, c.Offered)
	r.Attainment.ExRefused = ratio(c.Met, c.Offered-c.Refused)
	r.WallS = wallS
	r.fitWindows(r.wantWindowS, wallS)
	atTarget := 0
	for i := range r.Windows {
		w := &r.Windows[i]
		w.Attainment = ratio(w.Met, w.Offered)
		if w.Offered > 0 && w.Attainment >= r.Target {
			atTarget++
		}
		w.Prefill = prefillAt(r.Control.Splits, w.StartS+r.WindowS)
	}
	r.Attainment.Windows = ratio(atTarget, nonEmpty(r.Windows))
	for i := range r.Steps {
		s := &r.Steps[i]
		s.Attainment = ratio(s.Met, s.Offered)
		if s.Offered > 0 && s.Attainment >= r.Target {
			r.GoodputRPS = max(r.GoodputRPS, s.Rate)
		}
	}
	if wallS > 0 {
		r.MetRPS = float64(c.Met) / wallS
	}
	r.finishControl(wallS, shifts)
	h := &r.Handoff
	r.Handoff.CrossedShare = ratio(h.Crossed.N(), h.Crossed.N()+h.Local.N())
}

func (r *Run) finishControl(wallS float64, shifts []float64) {
	c := &r.Control
	if wallS > 0 {
		c.ReRolesPerHour = float64(len(c.Flips)) * 3600 / wallS
		c.ThrashPerHour = float64(c.Reversals) * 3600 / wallS
	}
	var lags []float64
	for _, b := range shifts {
		i := sort.Search(len(c.Flips), func(i int) bool { return c.Flips[i].At >= b })
		if i < len(c.Flips) {
			lags = append(lags, c.Flips[i].At-b)
		}
	}
	if len(lags) > 0 {
		slices.Sort(lags)
		c.AdaptS = &lags[len(lags)/2]
	}
}

func nonEmpty(ws []Window) int {
	n := 0
	for _, w := range ws {
		if w.Offered > 0 {
			n++
		}
	}
	return n
}

func prefillAt(splits []Split, t float64) int {
	p := 0
	for _, s := range splits {
		if s.At > t {
			break
		}
		p = s.Prefill
	}
	return p
}

func ratio(a, b int) float64 {
	if b <= 0 {
		return 0
	}
	return math.Round(float64(a)/float64(b)*1e6) / 1e6
}
