package serving

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Window is one journal's rows inside the evidence window, fed in file
// order: each run keeps the rows that arrived within width of its last
// arrival (NewWindow) or, for the router's own pass, every run keeps the
// rows within width of the journal's latest arrival in wall-clock time
// (NewWallWindow), and each engine's process generations are numbered as
// the journal's process_excluded events open them. It holds only what a
// record needs (about 56 bytes a row), so its memory is bounded by the
// window's rows whatever the journal's length; rows that fall out of the
// window are dropped as the window moves. The router keeps one across
// evidence passes and feeds it only the new rows (journal.Tail).
type Window struct {
	engines []string
	index   map[string]int16
	width   float64 // seconds; 0 keeps every row
	// wall places rows on the wall clock: a run's rows at its start (the
	// run id's Unix seconds) plus their arrival, so a run the router
	// served before a restart leaves the window as time moves on.
	wall     bool
	lastWall float64   // the latest row's wall time (wall only)
	start    []float64 // per run: its wall start, NaN when the run id does not say

	gens   [][]generation // per engine index
	epochs [][]int32      // the generation index of each engine, per epoch
	runs   []string
	runIdx map[string]int32
	last   []float64 // per run: the latest arrival
	rows   []wrow
	// compactAt is the row count at which rows out of the window are
	// dropped: twice what the last compaction kept, so dropping is
	// amortised over the rows added.
	compactAt int
}

// wrow is a request row as the window holds it.
type wrow struct {
	arrived, ttft, tpot float64 // ttft, tpot NaN when null
	run, epoch          int32
	in, wanted, out     int32 // wanted, out -1 when null
	prefill, decode     int16 // engine index; noEngine, or otherEngine outside the fleet
	terminal            uint8
}

const (
	noEngine    = -1
	otherEngine = -2
	minCompact  = 4096
)

// terminals numbers the terminal outcomes; 0 is one this build does not
// know.
var terminals = []string{"", journal.TerminalCompleted, journal.TerminalFailed, journal.TerminalRefused, journal.TerminalRejected,
	journal.TerminalExpired, journal.TerminalInvalid, journal.TerminalCancelled}

// Row is what one request row brings to a window.
type Row struct {
	Run                         string
	Arrived, TTFT, TPOT         float64 // TTFT, TPOT NaN when null
	InputLen, WantedLen, OutLen int     // WantedLen, OutLen -1 when null
	Terminal                    string
	Prefill, Decode             string // "" when the leg was never placed
}

// NewWallWindow is an empty window over the fleet's engines that keeps
// the last width of wall-clock time across runs (width > 0): what the
// router's evidence pass judges, so the runs before a restart do not
// stay in it for ever. A run whose id does not carry its start keeps its
// own last width, as NewWindow's do.
func NewWallWindow(engines []string, width time.Duration) *Window {
	w := NewWindow(engines, width)
	w.wall, w.lastWall = width > 0, math.Inf(-1)
	return w
}

// NewWindow is an empty window over the fleet's engines that keeps each
// run's last width of arrivals; width 0 keeps every row of every run.
func NewWindow(engines []string, width time.Duration) *Window {
	w := &Window{engines: engines, index: map[string]int16{}, width: width.Seconds(), runIdx: map[string]int32{},
		compactAt: minCompact}
	w.gens = make([][]generation, len(engines))
	first := make([]int32, len(engines))
	for i, iid := range engines {
		w.index[iid] = int16(i)
		w.gens[i] = []generation{{iid: iid}}
	}
	w.epochs = [][]int32{first}
	return w
}

// Brief feeds one journal row: request rows and process_excluded events;
// the rest are not evidence of serving.
func (w *Window) Brief(b *journal.Brief) {
	switch {
	case b.Kind == journal.KindRequest:
		w.add(b.Run, wrow{arrived: b.Arrived, ttft: b.TTFT, tpot: b.TPOT, in: int32(b.InputLen), wanted: int32(b.WantedLen),
			out: int32(b.OutputLen), prefill: w.engine(b.PrefillIID), decode: w.engine(b.DecodeIID), terminal: terminal(b.Terminal)})
	case b.Kind == journal.KindEvent && string(b.EventName) == journal.EventEngineLifecycle && string(b.Action) == "process_excluded":
		w.Exclusion(string(b.FlipIID), b.PreviousStart, b.ObservedStart)
	}
}

// Rows is how many rows the window holds (some may be out of it until
// the next compaction).
func (w *Window) Rows() int { return len(w.rows) }

// Request adds one request row.
func (w *Window) Request(r Row) {
	w.add([]byte(r.Run), wrow{arrived: r.Arrived, ttft: r.TTFT, tpot: r.TPOT, in: int32(r.InputLen), wanted: int32(r.WantedLen),
		out: int32(r.OutLen), prefill: w.engine([]byte(r.Prefill)), decode: w.engine([]byte(r.Decode)),
		terminal: terminal([]byte(r.Terminal))})
}

// add appends r as a row of run. It takes the run as bytes so that the
// Brief path, millions of rows on a first pass, allocates only for a
// new run.
func (w *Window) add(run []byte, r wrow) {
	ri, ok := w.runIdx[string(run)]
	if !ok {
		ri = int32(len(w.runs))
		w.runIdx[string(run)] = ri
		w.runs = append(w.runs, string(run))
		w.last = append(w.last, math.Inf(-1))
		w.start = append(w.start, runStart(run))
	}
	w.last[ri] = max(w.last[ri], r.arrived)
	if st := w.start[ri]; w.wall && !math.IsNaN(st) {
		w.lastWall = max(w.lastWall, st+r.arrived)
	}
	r.run, r.epoch = ri, int32(len(w.epochs)-1)
	w.rows = append(w.rows, r)
	if len(w.rows) >= w.compactAt {
		w.compact()
	}
}

// terminal numbers a terminal outcome (0 for one this build does not
// know).
func terminal(t []byte) uint8 {
	for i, s := range terminals {
		if s == string(t) {
			return uint8(i)
		}
	}
	return 0
}

func (w *Window) engine(iid []byte) int16 {
	if len(iid) == 0 {
		return noEngine
	}
	if i, ok := w.index[string(iid)]; ok {
		return i
	}
	return otherEngine
}

// Exclusion opens a new generation of iid when the router excluded its
// process because it restarted as a new, known process start (prev and
// obs are NaN or 0 when the event does not say).
func (w *Window) Exclusion(iid string, prev, obs float64) {
	i, ok := w.index[iid]
	if !ok || !(obs > 0) || vllm.SameStart(obs, prev) {
		return
	}
	gs := w.gens[i]
	if last := &gs[len(gs)-1]; last.processStart == 0 && prev > 0 {
		last.processStart = prev
	}
	w.gens[i] = append(gs, generation{iid: iid, index: len(gs), processStart: obs})
	cur := append([]int32(nil), w.epochs[len(w.epochs)-1]...)
	cur[i] = int32(len(gs))
	w.epochs = append(w.epochs, cur)
}

// runStart is the wall start a run id carries: "<unix seconds>-<hex>"
// (journal.Writer's ids); NaN for any other id.
func runStart(run []byte) float64 {
	secs, _, ok := strings.Cut(string(run), "-")
	n, err := strconv.ParseInt(secs, 10, 64)
	if !ok || err != nil || n <= 0 {
		return math.NaN()
	}
	return float64(n)
}

// in says r is inside its window.
func (w *Window) in(r *wrow) bool {
	switch {
	case w.width <= 0:
		return true
	case w.wall && !math.IsNaN(w.start[r.run]):
		return w.start[r.run]+r.arrived >= w.lastWall-w.width
	}
	return r.arrived >= w.last[r.run]-w.width
}

// compact drops the rows out of their window, keeping file order.
func (w *Window) compact() {
	kept := w.rows[:0]
	for i := range w.rows {
		if w.in(&w.rows[i]) {
			kept = append(kept, w.rows[i])
		}
	}
	clear(w.rows[len(kept):])
	w.rows = kept
	w.compactAt = max(minCompact, 2*len(kept))
	if cap(w.rows) > 4*w.compactAt { // a window that shrank gives its memory back
		w.rows = append(make([]wrow, 0, w.compactAt), w.rows...)
	}
}

// legs lists the fleet engines a row's legs ran on, each once, and says
// whether it was placed at all: a row never placed (refused, rejected or
// expired before a leg) counts at the fleet's level (Records), and a leg
// on an engine outside the fleet counts for none.
func (w *Window) legs(r *wrow, buf []int16) ([]int16, bool) {
	buf = buf[:0]
	placed := false
	for _, e := range []int16{r.prefill, r.decode} {
		if e == noEngine {
			continue
		}
		placed = true
		if e >= 0 && (len(buf) == 0 || buf[0] != e) {
			buf = append(buf, e)
		}
	}
	return buf, placed
}
