package report

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
)

// Options are the scoring choices shared by every input.
type Options struct {
	SLO     SLO     // required for journals; a bench file brings its router's
	Target  float64 // attainment a rate must reach to count as sustained (0: 0.9)
	WindowS float64 // window length in seconds (0: about a thirtieth of the run, 1 s to 60 s)
	Phases  int     // equal phases a journal without a bench is cut into for time to adapt (0: 3)
}

func (o Options) withDefaults() Options {
	if o.Target <= 0 {
		o.Target = 0.9
	}
	if o.Phases <= 0 {
		o.Phases = 3
	}
	return o
}

// journalScan is the state of one pass over a journal set.
type journalScan struct {
	r          *Run
	bench      *benchIndex
	first      time.Time // the first run's start; offsets later runs
	pending    time.Time // the last meta row's start, for the next run id
	offsets    map[string]float64
	offset     float64
	lastRun    string
	minT, maxT float64
	truncated  bool
	torn       journal.Torn
}

// ReadJournal scores the journal at path, every file of a rotated set.
// bench, when not nil, is a bench run whose records the rows are joined
// to by request id (client_rid), so the journal's rows are also scored
// per offered rate. A truncated final row is reported (in Refusals), the
// rows before it are scored; torn rows are skipped and counted in
// TornRows.
func ReadJournal(path string, bench *Run, o Options) (*Run, error) {
	o = o.withDefaults()
	if !(o.SLO.TTFT > 0 && o.SLO.TPOT > 0) {
		return nil, fmt.Errorf("score %s: no SLO: pass --ttft-slo and --tpot-slo (or --fleet, or a bench file of the same router)", path)
	}
	files, err := journal.SetFiles(path)
	if err != nil {
		return nil, err
	}
	s := &journalScan{r: newRun(path, "journal", o.SLO, o.Target, o.WindowS), offsets: map[string]float64{},
		minT: math.Inf(1), maxT: math.Inf(-1)}
	s.r.Files = files
	if bench != nil {
		s.bench = bench.index
		s.r.Join = &Join{Bench: bench.Name, NotSent: bench.index.notSent}
		for _, st := range bench.Steps {
			s.r.Steps = append(s.r.Steps, Step{Rate: st.Rate, StartS: st.StartS, DurationS: st.DurationS})
		}
	}
	s.torn, err = journal.ScanBriefs(path, s.add)
	if errors.Is(err, journal.ErrTruncated) {
		s.truncated = true
	} else if err != nil {
		return nil, err
	}
	s.r.TornRows = &s.torn
	s.finish(bench, o)
	return s.r, nil
}

func (s *journalScan) add(b *journal.Brief) error {
	if b.Kind == journal.KindMeta {
		s.meta(b.Started)
		return nil
	}
	if string(b.Run) != s.lastRun {
		s.enterRun(string(b.Run))
	}
	switch {
	case b.Kind == journal.KindRequest:
		s.request(b)
	case b.Kind == journal.KindEvent && string(b.EventName) == journal.EventControllerDecision:
		s.decision(b)
	}
	return nil
}

// meta notes a run's start: the next new run id's times are offset by
// it, so a journal of several router runs reads on one clock.
func (s *journalScan) meta(started []byte) {
	m := journal.Meta{Started: string(started)}
	t, ok := m.StartTime()
	if !ok {
		return
	}
	if s.first.IsZero() {
		s.first = t
		s.r.Start = m.Started
	}
	s.pending = t
}

func (s *journalScan) enterRun(run string) {
	s.lastRun = run
	off, seen := s.offsets[run]
	if !seen {
		if !s.pending.IsZero() {
			off = s.pending.Sub(s.first).Seconds()
		}
		s.offsets[run] = off
		s.r.Runs = append(s.r.Runs, run)
	}
	s.offset = off
}

func (s *journalScan) request(b *journal.Brief) {
	at := s.offset + b.Arrived
	s.minT, s.maxT = min(s.minT, at), max(s.maxT, at)
	step := s.join(b)
	r := s.r
	terminal := string(b.Terminal)
	r.Counts.ByOutcome[terminal]++
	completed := terminal == journal.TerminalCompleted
	ttft, tpot := nullable(b.TTFT), nullable(b.TPOT)
	met := completed && sloMet(r.SLO, ttft, tpot, b.OutputLen, b.WantedLen)
	r.count(at, step, met, terminal == journal.TerminalRefused)
	r.Counts.Sent++
	if !completed {
		key := terminal
		if b.Reason != nil {
			key += ":" + string(b.Reason)
		}
		r.Refusals[key]++
	} else {
		r.Counts.Completed++
		r.latencies(ttft, tpot, &b.DurationS)
	}
	if !b.HasError && ttft != nil && !math.IsNaN(b.FirstByte) {
		h := r.Handoff.Local
		if b.Crossed {
			h = r.Handoff.Crossed
		}
		h.Add(b.FirstByte - b.TTFT)
	}
	s.engine(b.PrefillIID, "prefill", at)
	s.engine(b.DecodeIID, "decode", at)
}

func nullable(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// latencies adds a completed request's times and counts its misses.
func (r *Run) latencies(ttft, tpot, e2e *float64) {
	if ttft != nil {
		r.TTFT.Add(*ttft)
		if *ttft > r.SLO.TTFT {
			r.TTFTLate++
		}
	}
	if tpot != nil {
		r.TPOT.Add(*tpot)
		if *tpot > r.SLO.TPOT {
			r.TPOTLate++
		}
	}
	if e2e != nil {
		r.E2E.Add(*e2e)
	}
}

func (s *journalScan) join(b *journal.Brief) int {
	if s.bench == nil {
		return -1
	}
	if b.ClientRID != nil {
		if step, ok := s.bench.take(b.ClientRID); ok {
			s.r.Join.Matched++
			return step
		}
	}
	s.r.Join.JournalOnly++
	return -1
}

// engine counts a leg the engine served and notes the role it was first
// seen in, the start of its role timeline.
func (s *journalScan) engine(iid []byte, role string, at float64) {
	if iid == nil {
		return
	}
	e := s.r.Engines[string(iid)]
	if role == "prefill" {
		e.Prefill++
	} else {
		e.Decode++
	}
	if len(e.Roles) == 0 {
		e.Roles = []RoleSpan{{At: min(at, 0), Role: role}}
	}
	s.r.Engines[string(iid)] = e
}

// decision reads an applied controller decision: the split from then on
// and, for a flip, the engine and its new role.
func (s *journalScan) decision(b *journal.Brief) {
	if !b.Applied {
		return
	}
	at := s.offset + b.At
	c := &s.r.Control
	c.Splits = append(c.Splits, Split{At: at, Prefill: b.Prefill, Decode: b.Decode})
	iid, to := string(b.FlipIID), string(b.FlipTo)
	if iid == "" || to == "" {
		return
	}
	if prev, ok := s.r.lastFlip[iid]; ok && prev != to {
		c.Reversals++
	}
	s.r.lastFlip[iid] = to
	c.Flips = append(c.Flips, Flip{At: at, IID: iid, To: to})
	e := s.r.Engines[iid]
	e.Roles = append(e.Roles, RoleSpan{At: at, Role: to})
	s.r.Engines[iid] = e
}

func (s *journalScan) finish(bench *Run, o Options) {
	r := s.r
	if s.truncated {
		r.Refusals["(torn final row, not scored)"]++
	}
	wall := 0.0
	if r.Counts.Offered > 0 {
		wall = s.maxT - s.minT
	}
	r.initialSplit()
	var shifts []float64
	if bench != nil {
		shifts = r.stepsFrom(bench, s.first)
		r.Join.BenchOnly = s.bench.unmatched()
	} else if wall > 0 {
		for k := 1; k < o.Phases; k++ {
			shifts = append(shifts, s.minT+float64(k)*wall/float64(o.Phases))
		}
	}
	r.finish(wall, shifts)
}

// initialSplit puts the split the engines started in before the first
// decision, from the roles each engine was first seen in.
func (r *Run) initialSplit() {
	p, d := 0, 0
	for _, e := range r.Engines {
		if len(e.Roles) == 0 {
			continue
		}
		if e.Roles[0].Role == "prefill" {
			p++
		} else {
			d++
		}
	}
	first := Split{At: 0, Prefill: p, Decode: d}
	r.Control.Splits = append([]Split{first}, r.Control.Splits...)
}

// stepsFrom moves the bench's steps onto the journal's clock: the bench
// started at its own wall time, the journal's clock at first. It returns
// the step starts after the first, the load shifts.
func (r *Run) stepsFrom(bench *Run, first time.Time) []float64 {
	off := 0.0
	if bt, err := time.Parse(time.RFC3339Nano, bench.Start); err == nil && !first.IsZero() {
		off = bt.Sub(first).Seconds()
	}
	var shifts []float64
	for i := range r.Steps {
		r.Steps[i].StartS += off
		if i > 0 {
			shifts = append(shifts, r.Steps[i].StartS)
		}
	}
	return shifts
}

func setFiles(path string) ([]string, error) { return journal.SetFiles(path) }
