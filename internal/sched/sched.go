// Package sched is narwhal's deterministic scheduling core: engine
// instances with their resident prefill and decode work, Arrow's
// lexicographic cost pairs, prefill and decode placement (Algorithm 1 steps
// 2 and 4), the predictive admission projection, and SLO-relative loads.
//
// It is a pure state machine in the manner of etcd's raft: it never reads a
// clock, sleeps, starts a goroutine or touches the network or disk. Time
// comes in as an argument (seconds on a monotonic scale chosen by the
// caller), so the router drives it with the real clock and the simulator
// with a virtual one. Its inputs are steps: Track, the compound placement
// steps Place and PlaceDecode (steps.go), the monitor events and Tick;
// Record logs each with its arguments and answer. A Core is not safe for
// concurrent use; the router serialises calls with one mutex.
package sched

import (
	"fmt"
	"math"
	"reflect"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/profile"
)

// Phase is the leg a request is in.
type Phase int

// The two phases.
const (
	Prefill Phase = iota
	Decode
)

func (p Phase) String() string {
	if p == Prefill {
		return "prefill"
	}
	return "decode"
}

// Options are the fleet values the core needs.
type Options struct {
	TTFT, TPOT        float64 // slo.ttft_s, slo.tpot_s
	AdmissionMargin   float64 // serving.admission_margin
	Predictive        bool    // serving.admission == "predictive"
	ProbationPenaltyS float64 // recovery.health.probation_penalty_s
	CorrectionAlpha   float64 // controller.reactive.decode_correction_alpha
	CorrectionMin     float64
	CorrectionMax     float64
	CorrectionSamples int

	// Policy chooses who changes roles; PolicyStatic keeps them.
	Policy Policy
	// Aggregated makes every engine serve both legs of a request: prefill
	// candidates are all live engines and decode stays on the producer (the
	// simulator's "aggregated" arm).
	Aggregated bool

	Controller fleet.Controller

	// PrefillSeats and DecodeSeats cap the legs resident on one engine per
	// phase (0: no cap). They exist only while the admission queue is on;
	// a request that finds every candidate full waits for a seat.
	PrefillSeats, DecodeSeats int

	// Queue bounds the deadline queue (queue.go); zero turns it off.
	Queue QueueLimits
}

// OptionsFrom reads Options from a validated fleet.
func OptionsFrom(c *fleet.Config) Options {
	r := c.Controller.Reactive
	o := Options{
		TTFT: c.SLO.TTFT, TPOT: c.SLO.TPOT,
		AdmissionMargin:   c.Serving.AdmissionMargin,
		Predictive:        c.Serving.Admission == fleet.AdmissionPredictive,
		ProbationPenaltyS: c.Recovery.Health.ProbationPenaltyS,
		CorrectionAlpha:   r.DecodeCorrectionAlpha,
		CorrectionMin:     r.DecodeCorrectionMin,
		CorrectionMax:     r.DecodeCorrectionMax,
		CorrectionSamples: r.DecodeCorrectionMinSamples,
		Policy:            PolicyReactive,
		Controller:        c.Controller,
		Queue:             QueueLimitsFrom(c.Serving),
	}
	if c.Serving.QueueCapacity > 0 {
		o.PrefillSeats, o.DecodeSeats = c.Serving.PrefillConcurrent, c.Serving.DecodeConcurrent
	}
	return o
}

// Request is what the core knows of one original request.
type Request struct {
	RID       string
	InputLen  int // sized prompt tokens
	WantedLen int // output cap; 0 when uncapped
	OutputLen int // decode tokens observed so far
	// CachedTokens is the cache evidence (warm.go): the leading prompt
	// tokens each engine with known residency holds. nil prices cold.
	CachedTokens map[string]int

	// What a decode token reads and writes comes first, together.
	at         *Instance // the engine where it is resident now, nil when not resident
	lastToken  float64   // time of the last decode token, for gaps
	tokensHere int
	phase      Phase
	sawToken   bool
	forgotten  bool // no longer the core's request for RID (OutputTokensOf)

	arrived  float64 // Track's time: the TTFT check counts elapsed seconds from it
	deadline float64 // the latest first placement that can meet the TTFT budget (queue.go)
	queued   *waiter // its place in the deadline queue, nil when not waiting
	producer string  // iid of the prefill leg's engine, once dispatched
	price    float64
}

// where is the iid of the engine r is resident on, "" when none.
func (r *Request) where() string {
	if r.at == nil {
		return ""
	}
	return r.at.IID
}

// kv is L(r): the request's KV length in tokens.
func (r *Request) kv() int { return r.InputLen + r.OutputLen }

// Instance is one engine as the scheduler sees it.
type Instance struct {
	IID  string
	Role fleet.Role
	Pin  bool
	Live bool
	// Probation adds the probation penalty to this engine's prices.
	Probation bool

	prof       profile.Row
	profClass  int     // instances whose rows are equal but for the iid share one
	correction float64 // live/profile decode interval ratio, starts at 1

	prefill map[string]*Request
	decode  map[string]*Request
	// Running sums keep placement O(engines) however many requests are
	// resident.
	prefillPrice  float64 // Σ T(p, i) over resident prefill
	prefillTokens int     // Σ L(p)
	decodeTokens  int     // Σ L(d)

	win window // the current monitor interval's observations
}

// Core is the scheduling state of one fleet.
type Core struct {
	opt       Options
	instances []*Instance // sorted by iid: deterministic iteration and ties
	byIID     map[string]*Instance
	requests  map[string]*Request

	unserved int
	queue    waitQueue // first placements waiting for room, earliest deadline first
	ctl      *controller
	cands    []*Instance // placement's candidates: scratch, as steps never nest
	pool     []*Instance // admitDecode's decode pool: scratch likewise
	level    []float64   // admitDecode's projected interval per pool engine: scratch
	inc      []float64   // decodeLevels' interval a pending leg adds per engine: scratch
	order    []int       // waterLevel's engine order: scratch
	rec      func(Step)  // Record's hook; nil when no one listens
}

// New builds a core for the fleet's engines with one profile row each,
// with the options the fleet implies (the reactive controller).
func New(c *fleet.Config, profiles *profile.Store) (*Core, error) {
	return NewWithOptions(c, profiles, OptionsFrom(c))
}

// NewWithOptions is New with explicit options: the simulator's arms choose
// the policy and aggregation.
func NewWithOptions(c *fleet.Config, profiles *profile.Store, opt Options) (*Core, error) {
	core := &Core{opt: opt, byIID: map[string]*Instance{}, requests: map[string]*Request{}}
	for _, e := range c.Engines {
		row, ok := profiles.Get(e.IID)
		if !ok {
			return nil, fmt.Errorf("sched: engine %s has no profile row: profile every configured engine", e.IID)
		}
		inst := &Instance{IID: e.IID, Role: e.Role, Pin: e.Pin, Live: true, prof: row, correction: 1,
			prefill: map[string]*Request{}, decode: map[string]*Request{}}
		inst.profClass = profClass(core.instances, row)
		core.instances = append(core.instances, inst)
		core.byIID[e.IID] = inst
	}
	sort.Slice(core.instances, func(i, j int) bool { return core.instances[i].IID < core.instances[j].IID })
	core.ctl = newController(core)
	return core, nil
}

// profClass is the class of an instance with row among those before it:
// an earlier one's when their rows are equal but for the iid, else a new one.
func profClass(before []*Instance, row profile.Row) int {
	row.IID = ""
	for _, i := range before {
		other := i.prof
		other.IID = ""
		if reflect.DeepEqual(row, other) {
			return i.profClass
		}
	}
	return len(before)
}

// SetProfile replaces an engine's profile row (a re-profiled engine,
// the profile store re-read): placement prices it with the new curves
// from now on, its correction starts again at 1 (it measured the old
// curves' error), and the profile classes are drawn again. Work resident
// on it keeps its placement.
func (c *Core) SetProfile(iid string, row profile.Row) {
	i := c.byIID[iid]
	if i == nil || reflect.DeepEqual(i.prof, row) {
		return
	}
	i.prof, i.correction = row, 1
	for k, inst := range c.instances {
		inst.profClass = profClass(c.instances[:k], inst.prof)
	}
	c.log(Step{Kind: StepSetProfile, IID: iid, Profile: &row})
}

// Profile is the row the engine is priced with.
func (i *Instance) Profile() profile.Row { return i.prof }

// Instance returns the engine iid, or nil.
func (c *Core) Instance(iid string) *Instance { return c.byIID[iid] }

// SetLive puts an engine in or out of placement (lifecycle, breaker).
func (c *Core) SetLive(iid string, live bool) {
	if i := c.byIID[iid]; i != nil && i.Live != live {
		i.Live = live
		c.log(Step{Kind: StepSetLive, IID: iid, On: live})
	}
}

// SetRole relabels an engine; resident work finishes where it is.
func (c *Core) SetRole(iid string, role fleet.Role) {
	if i := c.byIID[iid]; i != nil && i.Role != role {
		i.Role = role
		c.log(Step{Kind: StepSetRole, IID: iid, Role: role})
	}
}

// Unserved counts placements where no engine met the SLO.
func (c *Core) Unserved() int { return c.unserved }

// penalty is the probation penalty of i in seconds.
func (c *Core) penalty(i *Instance) float64 {
	if i.Probation {
		return c.opt.ProbationPenaltyS
	}
	return 0
}

// budget is the TTFT budget with the admission margin.
func (c *Core) budget() float64 { return c.opt.TTFT * (1 + c.opt.AdmissionMargin) }

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
