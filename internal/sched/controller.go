package sched

import (
	"fmt"
	"math"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// controller holds role-control state between evaluations.
type controller struct {
	c   *Core
	cfg fleet.Controller

	hist      history
	outputs   outputs
	residency []residencySample
	capCache  grid[capEntry]  // capacity by (prompt, output) class, for the pass it names
	capPass   uint64          // counts monitor passes: shapes' remembered capacities name theirs
	runs      decodeRuns      // the instances in runs of one class and correction: estimate's scratch for capacity
	prepared  []preparedShape // by shape id: each shape's last DecodeShape

	started  bool
	start    float64 // first time seen: process start counts as a P→D move
	lastEval float64
	lastP2D  float64
	lastFlip map[string]float64
	lastTo   map[string]fleet.Role

	proposal struct {
		prefill int
		rule    string
		count   int
	}
	evidence struct {
		start    float64
		arrivals int
	}
	sustained, panicRun int   // Arrow's monitor trigger and the panic bypass
	loads               Loads // pool loads of the interval this pass closed

	flips     []Flip
	refused   []Refused
	decisions map[string]int
	flipCount map[string]int
	reversals int
	bypasses  int
	last      *Decision
}

func newController(c *Core) *controller {
	return &controller{c: c, cfg: c.opt.Controller,
		lastFlip: map[string]float64{}, lastTo: map[string]fleet.Role{},
		decisions: map[string]int{}, flipCount: map[string]int{}}
}

func (k *controller) observeTime(now float64) {
	if !k.started {
		k.started, k.start, k.lastP2D, k.lastEval = true, now, now, math.Inf(-1)
		k.evidence.start = now
	}
}

// arrival records a sized request for the demand model.
func (k *controller) arrival(at float64, r *Request) {
	k.observeTime(at)
	k.hist.add(at, k.arrivalPrice(r), shape{octave8(r.InputLen), octave8(r.WantedLen)})
	k.evidence.arrivals++
}

// finished learns delivered output lengths.
func (k *controller) finished(r *Request) {
	k.outputs.observe(r.WantedLen, r.OutputLen)
}

// meanPrefill is the fleet-mean cold prefill time of an n-token prompt.
// Instances of one profile class price it alike: the row is read once per
// run of them, and the sum takes every instance's value in order.
func (k *controller) meanPrefill(n int) float64 {
	s, v := 0.0, 0.0
	var prev *Instance
	for _, i := range k.c.instances {
		if prev == nil || i.profClass != prev.profClass {
			v = i.prof.PrefillTime(n)
		}
		s += v
		prev = i
	}
	return s / float64(max(1, len(k.c.instances)))
}

// Tick is one monitor pass at now: it closes the interval windows and, with
// a controller policy, evaluates role control. It returns the evaluations
// it made: none when there was nothing to decide.
func (c *Core) Tick(now float64) []Decision {
	k := c.ctl
	k.observeTime(now)
	k.settleDrains(now)
	k.sampleResidency(now)
	// Loads are read from the interval that is closing, before Roll starts
	// the next one.
	k.loads = c.PoolLoads(now)
	c.Roll(now)
	k.capPass++ // corrections moved: capCache's older entries no longer answer
	k.hist.prune(now - c.opt.Controller.Reactive.WindowS)
	var out []Decision
	switch c.opt.Policy {
	case PolicyReactive:
		if d := k.repairFloors(now); d != nil {
			out = append(out, *d)
		} else if d := k.evaluate(now); d != nil {
			out = append(out, *d)
		}
	case PolicyArrow:
		if d := k.arrowMonitor(now); d != nil {
			out = append(out, *d)
		}
	}
	for i := range out {
		k.record(&out[i])
	}
	if c.rec != nil {
		c.rec(Step{Kind: StepTick, Now: now, Decisions: out})
	}
	return out
}

func (k *controller) record(d *Decision) {
	k.decisions[d.By+":"+d.Result]++
	k.last = d
}

// pools counts live engines per role.
func (k *controller) pools() (p, d int, assignedP, assignedD int) {
	for _, i := range k.c.instances {
		if i.Role == fleet.Prefill {
			assignedP++
			if i.Live {
				p++
			}
		} else {
			assignedD++
			if i.Live {
				d++
			}
		}
	}
	return p, d, assignedP, assignedD
}

// repairFloors moves one engine when a live pool is below its floor.
func (k *controller) repairFloors(now float64) *Decision {
	p, d, _, _ := k.pools()
	switch {
	case d < k.cfg.MinDecode && p > 0:
		f, why := k.flip(now, fleet.Decode, "decode_floor", flipOpts{ignoreCooldown: true})
		k.riskEvent(now)
		return k.decision(now, "decode_floor", fmt.Sprintf("live decode %d is below min_decode %d", d, k.cfg.MinDecode), f, why)
	case p < k.cfg.MinPrefill && d > k.cfg.MinDecode:
		f, why := k.flip(now, fleet.Prefill, "floor_recovery", flipOpts{ignoreCooldown: true, ignoreDwell: true})
		return k.decision(now, "floor_recovery", fmt.Sprintf("live prefill %d is below min_prefill %d", p, k.cfg.MinPrefill), f, why)
	}
	return nil
}

// decision builds the record of one evaluation that tried a flip.
func (k *controller) decision(now float64, by, reason string, f *Flip, why string) *Decision {
	p, d, _, _ := k.pools()
	dec := &Decision{At: now, Prefill: p, Decode: d, By: by, Reason: reason, Flip: f}
	switch {
	case f != nil:
		dec.Result, dec.Applied = ResultApplied, true
	case why == whyAdvisory:
		dec.Result, dec.Reason = ResultAdvisory, reason+"; "+why
	default:
		dec.Result, dec.Reason = ResultBlocked, reason+"; "+why
	}
	return dec
}

// riskEvent restarts the consolidation evidence window: something just
// showed the decode pool may be short.
func (k *controller) riskEvent(now float64) {
	k.evidence.start, k.evidence.arrivals = now, 0
}

// settleDrains stamps drained_s on flips whose engine no longer holds work
// of its old role.
func (k *controller) settleDrains(now float64) {
	for i := len(k.flips) - 1; i >= 0; i-- {
		f := &k.flips[i]
		if f.DrainedS != nil {
			continue
		}
		inst := k.c.byIID[f.IID]
		old := len(inst.decode)
		if f.To == fleet.Decode {
			old = len(inst.prefill)
		}
		if old == 0 {
			d := now - f.At
			f.DrainedS = &d
		}
	}
}

// Flips returns the role-change history, oldest first (at most
// controller.flip_history records).
func (c *Core) Flips() []Flip { return append([]Flip(nil), c.ctl.flips...) }

// ControlState is the controller's view for /narwhal/state.
type ControlState struct {
	Policy        string         `json:"policy"`
	Advisory      bool           `json:"advisory"`
	LastDecision  *Decision      `json:"last_decision"`
	Decisions     map[string]int `json:"decisions"`
	Flips         map[string]int `json:"flips"`
	FlipReversals int            `json:"flip_reversals"`
	FlipsRefused  []Refused      `json:"flips_refused"`
	PanicBypasses int            `json:"panic_bypasses"`
	History       []Flip         `json:"history"`
}

// Control returns a copy of the controller's counters and history.
func (c *Core) Control() ControlState {
	k := c.ctl
	s := ControlState{Policy: c.opt.Policy.String(), Advisory: k.cfg.Advisory, Decisions: map[string]int{},
		Flips: map[string]int{}, FlipReversals: k.reversals, PanicBypasses: k.bypasses,
		FlipsRefused: append([]Refused{}, k.refused...), History: append([]Flip{}, k.flips...)}
	for key, n := range k.decisions {
		s.Decisions[key] = n
	}
	for key, n := range k.flipCount {
		s.Flips[key] = n
	}
	if k.last != nil {
		d := *k.last
		s.LastDecision = &d
	}
	return s
}

// RefusedSince counts the refused flips s holds that before did not (the
// history keeps the last few; newer ones have later times).
func (s ControlState) RefusedSince(before ControlState) int {
	last := -1.0
	if n := len(before.FlipsRefused); n > 0 {
		last = before.FlipsRefused[n-1].At
	}
	k := 0
	for _, f := range s.FlipsRefused {
		if f.At > last {
			k++
		}
	}
	return k
}
