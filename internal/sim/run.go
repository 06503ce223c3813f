package sim

import (
	"fmt"
	"math"

	"github.com/narwhal-go/narwhal/internal/enginemodel"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// engine is one simulated engine: its service model and its label as last
// seen in the core. The legs it runs are named by their model requests'
// Ref (legRef).
type engine struct {
	idx     int // in rn.engines
	iid     string
	inst    *sched.Instance
	role    fleet.Role
	pin     bool
	flipped int
	m       *enginemodel.Model
	busy    bool             // a step is in flight
	step    enginemodel.Step // the step in flight, while busy
	cache   *simCache        // nil without prefix caching
}

type legKind uint8

const (
	legPrefill legKind = iota + 1 // producer: prompt + 1 token, KV held for the consumer
	legDecode                     // consumer: KV pulled, every output token
	legBoth                       // aggregated: one engine request does both
)

type leg struct {
	r    *request
	kind legKind
}

// legRef is the leg's handle on its engine model: the request's index and
// the leg's kind, so that a step's events find their leg without a lookup
// (stepDone reads rn.reqs[ref>>2] and legKind(ref&3)).
func legRef(l leg) int { return l.r.idx<<2 | int(l.kind) }

// request is one arrival's life in the simulation.
type request struct {
	// What a decode token reads and writes comes first, together.
	done   bool
	tokens int
	last   int64
	core   *sched.Request // the core's handle (Track's answer)

	a                   Arrival
	idx                 int // in the trace and rn.reqs
	rid                 string
	arrived             int64
	prefillDone         int64
	prod, cons          *engine
	prefillID, decodeID string
	blocks              []blockKey // the prompt's full blocks, with prefix caching
	waiting             bool       // in the core's deadline queue
}

// runner is one simulation. Virtual time is integer nanoseconds so that
// sums of step durations never drift; the core sees float seconds.
type runner struct {
	f       Fleet
	arm     Arm
	slo     fleet.SLO
	d       driver // every step into the scheduling core
	engines []*engine
	byIID   map[string]*engine
	q       queue
	now     int64
	tr      Trace
	reqs    []request
	waiting []string // serveQueue's scratch: the queue's rids in order
	next    int      // next arrival index
	open    int      // requests not yet terminal
	tickNS  int64
	endNS   int64 // offer window end
	capNS   int64 // drain bound
	res     *Result
	pools   [2]int // prefill, decode as last observed
	// Block-name storage of requests past their prefill, for arrivals.
	spareBlocks [][]blockKey
}

// Run simulates arm on tr and scores every request.
func Run(f Fleet, arm Arm, tr Trace) (*Result, error) {
	rn, err := newRunner(f, arm, tr)
	if err != nil {
		return nil, err
	}
	if err := rn.loop(); err != nil {
		return nil, err
	}
	return rn.res, nil
}

func newRunner(f Fleet, arm Arm, tr Trace) (*runner, error) {
	if arm.Prefill < 0 || arm.Prefill > f.Engines {
		return nil, fmt.Errorf("sim: arm %s starts with %d prefill engines of %d", arm.Name, arm.Prefill, f.Engines)
	}
	cfg, store, err := f.document(arm.Prefill)
	if err != nil {
		return nil, err
	}
	opt, err := arm.options(sched.OptionsFrom(cfg))
	if err != nil {
		return nil, err
	}
	core, err := sched.NewWithOptions(cfg, store, opt)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	rn := &runner{f: f, arm: arm, slo: cfg.SLO, d: driver{core}, byIID: map[string]*engine{}, tr: tr,
		reqs: make([]request, len(tr.Arrivals)), res: &Result{Arm: arm.Name, Offered: len(tr.Arrivals),
			ByResult: map[string]int{}, RefusedBy: map[string]int{}},
		tickNS: nanos(cfg.Controller.MonitorIntervalS), endNS: nanos(tr.DurationS)}
	rn.capNS = rn.endNS + nanos(f.DrainS)
	for _, e := range cfg.Engines {
		row, _ := store.Get(e.IID)
		overhead := 0.0
		if f.BatchedPrefill {
			overhead = max(0, row.TTFTC)
		}
		m, err := enginemodel.New(enginemodel.Config{Timing: rowTiming{&row, row.DecodeFit()}, KVCapacityTokens: f.Shape.KVCapacityTokens,
			StepOverheadS: overhead,
			BlockSize:     f.Shape.BlockSize, MaxNumSeqs: f.Shape.MaxNumSeqs, MaxBatchedTokens: f.Shape.MaxBatchedTokens,
			ReuseBuffers: true, RefsOnly: true})
		if err != nil {
			return nil, fmt.Errorf("sim: engine %s: %w", e.IID, err)
		}
		eng := &engine{idx: len(rn.engines), iid: e.IID, inst: core.Instance(e.IID), role: e.Role, pin: e.Pin, m: m}
		if f.PrefixCaching {
			eng.cache = newSimCache(m.Stats().BlockSize)
		}
		rn.engines = append(rn.engines, eng)
		rn.byIID[e.IID] = eng
	}
	rn.res.MinPrefill, rn.res.MinDecode = f.Engines, f.Engines
	rn.observe()
	return rn, nil
}

// rowTiming prices an engine model's steps with its profile row's own
// prices. A Row in the Timing interface is copied whole into each
// value-method call, once per decode step; here a decode step reads the
// row's DecodeFit, and prefill goes through a pointer to the row.
type rowTiming struct {
	row *profile.Row
	fit profile.DecodeFit
}

func (t rowTiming) PrefillTime(n int) float64 { return t.row.PrefillTime(n) }

func (t rowTiming) CachedPrefillTime(cached, uncached int) (float64, bool) {
	return t.row.CachedPrefillTime(cached, uncached)
}

func (t rowTiming) TokenInterval(tokens, requests int) float64 {
	return t.fit.TokenInterval(tokens, requests)
}

func nanos(s float64) int64 { return int64(math.Round(s * 1e9)) }

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// nowS is the virtual time in seconds, as the core takes it.
func (rn *runner) nowS() float64 { return secs(rn.now) }

// loop runs events until none are left or the drain bound passes.
func (rn *runner) loop() error {
	if len(rn.tr.Arrivals) > 0 {
		rn.q.push(event{at: nanos(rn.tr.Arrivals[0].At), kind: evArrival})
	}
	if rn.tickNS > 0 {
		rn.q.push(event{at: rn.tickNS, kind: evTick})
	}
	for k, o := range rn.f.Outages {
		rn.q.push(event{at: nanos(o.FromS), kind: evOutage, idx: 2 * k})
		rn.q.push(event{at: nanos(o.ToS), kind: evOutage, idx: 2*k + 1})
	}
	for rn.q.len() > 0 {
		ev, _ := rn.q.pop()
		if ev.at > rn.capNS {
			break
		}
		rn.now = ev.at
		if err := rn.handle(ev); err != nil {
			return err
		}
	}
	for i := range rn.reqs[:rn.next] {
		if r := &rn.reqs[i]; !r.done {
			rn.end(r, &rn.res.Unfinished)
		}
	}
	rn.res.SimulatedS = rn.nowS()
	for _, e := range rn.engines {
		rn.res.Preemptions += e.m.Stats().Preemptions
	}
	rn.res.finishStats(rn.tr.DurationS)
	return nil
}

func (rn *runner) handle(ev event) error {
	switch ev.kind {
	case evArrival:
		if ev.idx+1 < len(rn.tr.Arrivals) {
			rn.q.push(event{at: nanos(rn.tr.Arrivals[ev.idx+1].At), kind: evArrival, idx: ev.idx + 1})
		}
		rn.next = ev.idx + 1
		rn.arrive(&rn.reqs[ev.idx], rn.tr.Arrivals[ev.idx], ev.idx)
	case evStep:
		return rn.stepDone(rn.engines[ev.idx])
	case evKV:
		rn.kvArrived(&rn.reqs[ev.idx])
	case evTick:
		rn.tick()
	case evDeadline:
		if r := &rn.reqs[ev.idx]; r.waiting && !r.done {
			rn.placeFirst(r)
		}
	case evOutage:
		rn.d.setLive(IID(rn.f.Outages[ev.idx/2].Engine), ev.idx%2 == 1)
	}
	rn.serveQueue()
	return nil
}

// tick is one monitor pass; the next is scheduled while there is traffic
// to come, work open, or offer window left.
func (rn *runner) tick() {
	for _, d := range rn.d.tick(rn.nowS()) {
		rn.res.Decisions++
		rn.res.ByResult[d.Result]++
	}
	rn.observe()
	next := rn.now + rn.tickNS
	if (rn.next < len(rn.tr.Arrivals) || rn.open > 0 || next <= rn.endNS) && next <= rn.capNS {
		rn.q.push(event{at: next, kind: evTick})
	}
}

// kick starts e's next step when it is idle and has work.
func (rn *runner) kick(e *engine) {
	if e.busy {
		return
	}
	var ok bool
	if e.step, ok = e.m.Next(); !ok { // written in place: e.step is read only while busy
		return
	}
	e.busy = true
	rn.q.push(event{at: rn.now + int64(e.step.Duration), kind: evStep, idx: e.idx})
}

// observe reads every engine's label from the core: counts flips, pinned
// moves and floors, and records split changes. Labels change only inside
// core steps (Tick, or the placement steps under the Arrow policy), so the
// runner observes after each.
func (rn *runner) observe() {
	var pools [2]int
	for _, e := range rn.engines {
		if role := e.inst.Role; role != e.role {
			rn.res.Flips++
			if e.flipped > 0 {
				rn.res.Reversals++ // roles are binary: a second flip undoes the first
			}
			if e.pin {
				rn.res.PinnedMoves++
			}
			e.flipped++
			e.role = role
		}
		if e.role == fleet.Prefill {
			pools[0]++
		} else {
			pools[1]++
		}
	}
	rn.res.MinPrefill = min(rn.res.MinPrefill, pools[0])
	rn.res.MinDecode = min(rn.res.MinDecode, pools[1])
	if pools != rn.pools || len(rn.res.Splits) == 0 {
		rn.pools = pools
		rn.res.Splits = append(rn.res.Splits, Split{At: rn.nowS(), Prefill: pools[0], Decode: pools[1]})
	}
}
