package sched

import (
	"math"
	"slices"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// Cost is Arrow's lexicographic cost pair.
type Cost struct{ Primary, Secondary float64 }

// less orders costs lexicographically; callers break ties by iid.
func (a Cost) less(b Cost) bool {
	if a.Primary != b.Primary {
		return a.Primary < b.Primary
	}
	return a.Secondary < b.Secondary
}

// PrefillCost is cost_P(r, i): (decode KV held by i, seconds until r's
// prefill would finish on i).
func (c *Core) PrefillCost(r *Request, i *Instance) Cost {
	return Cost{
		Primary:   float64(i.decodeTokens),
		Secondary: i.prefillPrice + c.prefillTime(r, i) + c.penalty(i),
	}
}

// DecodeCost is cost_D(r, i): (prefill KV resident on i, tokens beyond the
// batch that still meets the TPOT target; ≤ 0 fits).
func (c *Core) DecodeCost(r *Request, i *Instance) Cost {
	mt := i.prof.MT(c.opt.TPOT/i.correction, len(i.decode)+1)
	return Cost{
		Primary:   float64(i.prefillTokens),
		Secondary: float64(i.decodeTokens+r.kv()) - mt + c.penalty(i)/c.opt.TPOT,
	}
}

// Placement is where a leg goes and what it is expected to cost.
type Placement struct {
	IID        string
	Cost       Cost
	MeetsSLO   bool
	Fallback   bool    // aggregate fallback: no live engine of the leg's role
	OwnPrefill float64 // T(r, i) alone, without queue or penalty
	Warm       *Warm   // prefill: the cache evidence it was priced with; nil when priced cold
}

// Refusal is why the core will not place a leg now. It names a cause and
// what the core projects, never what the cause means to a client: the
// router maps causes to HTTP statuses and error types (one table, openai/refusal.go, that the router asks),
// the simulator to its own outcome counts.
type Refusal struct {
	Cause string // one of the Cause constants: refused_cause / reason for the journal
	// Wait: every candidate is at its phase seats; the caller may wait for
	// one to free and place again.
	Wait bool
	// RetryAfter is when the core projects room, in whole seconds; 0 when
	// waiting will not help (the prompt alone is over the target).
	RetryAfter int
	// Deadline is, for a Wait from the deadline queue, the time (on the
	// core's scale) after which waiting cannot help: place again then, and
	// the core answers CauseDeadline. 0 for a seat wait without the queue.
	Deadline float64
	Message  string // what the core found, for a person
}

func (r *Refusal) Error() string { return r.Message }

// Refusal causes.
const (
	CausePrompt            = "prompt"
	CauseQueue             = "queue"
	CauseAggregateUnpriced = "aggregate_unpriced"
	CauseTPOT              = "tpot"
	CauseKVCapacity        = "kv_capacity"
	CauseNoEngine          = "no_engine"
	CauseSeats             = "seats"
	// CauseUntracked: the step named a request the core was never told of
	// (Track), or has forgotten (Finished): a caller's bug.
	CauseUntracked = "untracked"
)

// Causes is every refusal cause, for callers that map each one.
func Causes() []string {
	return []string{CausePrompt, CauseQueue, CauseAggregateUnpriced, CauseTPOT, CauseKVCapacity, CauseNoEngine, CauseSeats, CauseUntracked,
		CauseDeadline, CauseQueueFull}
}

// candidates returns the live engines of role outside exclude, or under
// aggregate fallback every live unpinned engine outside exclude.
// The slice is the core's scratch, valid until the next placement step.
func (c *Core) candidates(role fleet.Role, exclude map[string]bool) (out []*Instance, fallback bool) {
	out = c.cands[:0]
	defer func() { c.cands = out[:0] }()
	for _, i := range c.instances {
		if c.opt.Aggregated && i.Live && !exclude[i.IID] {
			out = append(out, i)
			continue
		}
		if i.Live && i.Role == role && !exclude[i.IID] {
			out = append(out, i)
		}
	}
	if len(out) > 0 {
		return out, false
	}
	for _, i := range c.instances {
		if i.Live && !i.Pin && !exclude[i.IID] {
			out = append(out, i)
		}
	}
	return out, true
}

// seated keeps the candidates with a free seat for phase, in place. none
// reports that candidates existed but every one was full.
func (c *Core) seated(cands []*Instance, phase Phase) (out []*Instance, none bool) {
	out = cands[:0]
	for _, i := range cands {
		if c.seatFree(i, phase) {
			out = append(out, i)
		}
	}
	return out, len(cands) > 0 && len(out) == 0
}

// seatFree reports whether i can take one more leg of phase. Decode seats
// are also bounded by the profile's decode_max_requests.
func (c *Core) seatFree(i *Instance, phase Phase) bool {
	if phase == Prefill {
		return c.opt.PrefillSeats <= 0 || len(i.prefill) < c.opt.PrefillSeats
	}
	limit := c.opt.DecodeSeats
	if limit <= 0 {
		return true
	}
	if m := i.prof.DecodeMaxRequests; m != nil && *m > 0 {
		limit = min(limit, *m)
	}
	return len(i.decode) < limit
}

// seatsFull is the refusal for a leg that must wait for a phase seat.
func seatsFull(phase Phase) *Refusal {
	if phase == Prefill {
		return &Refusal{Wait: true, Cause: CauseSeats,
			Message: "every engine that can take the prefill leg is at its prefill seats"}
	}
	return &Refusal{Wait: true, Cause: CauseSeats,
		Message: "every engine that can take the decode leg is at its decode seats"}
}

// cheapest returns the lexicographically cheapest candidate that meets the
// SLO, else the cheapest overall; ties go to the lowest iid because
// candidates come sorted.
func cheapest(cands []*Instance, cost func(*Instance) Cost, meets func(Cost) bool) (best *Instance, bestCost Cost, met bool) {
	for _, i := range cands {
		k := cost(i)
		m := meets(k)
		if best == nil || (m && !met) || (m == met && k.less(bestCost)) {
			best, bestCost, met = i, k, m
		}
	}
	return best, bestCost, met
}

// choosePrefill chooses the prefill engine for r (Algorithm 1 steps 2 and
// 4). It changes nothing: growing a pool is the Place step's (arrowGrow).
func (c *Core) choosePrefill(r *Request, exclude map[string]bool) (Placement, *Refusal) {
	cands, fallback := c.candidates(fleet.Prefill, exclude)
	if len(cands) == 0 {
		return Placement{}, &Refusal{Cause: CauseNoEngine, RetryAfter: 1, Message: "no engine can take the prefill leg"}
	}
	cands, full := c.seated(cands, Prefill)
	if full {
		return Placement{}, seatsFull(Prefill)
	}
	best, k, met := cheapest(cands, func(i *Instance) Cost { return c.prefillCost(r, i, fallback) },
		func(k Cost) bool { return k.Secondary <= c.opt.TTFT })
	pl := c.prefillOn(r, best, k, met, fallback)
	if len(r.CachedTokens) > 0 {
		pl.Warm = c.warmOn(r, best, cands, fallback)
	}
	return pl, nil
}

// prefillCost is cost_P(r, i) as placement prices it: under aggregate
// fallback an engine busy decoding cannot price a prefill it would have to
// interleave with that work.
func (c *Core) prefillCost(r *Request, i *Instance, fallback bool) Cost {
	k := c.PrefillCost(r, i)
	if fallback && len(i.decode) > 0 {
		k.Secondary = math.Inf(1)
	}
	return k
}

func (c *Core) prefillOn(r *Request, i *Instance, k Cost, met, fallback bool) Placement {
	return Placement{IID: i.IID, Cost: k, MeetsSLO: met, Fallback: fallback, OwnPrefill: c.prefillTime(r, i)}
}

// admitTTFT refuses when the cheapest prefill path cannot meet the TTFT
// budget: the prompt alone is too long, the queue is too deep, or no
// engine can price the leg at all.
func (c *Core) admitTTFT(p Placement, elapsed float64) *Refusal {
	b := c.budget()
	price := elapsed + p.Cost.Secondary
	if price <= b {
		return nil
	}
	switch {
	case math.IsInf(p.Cost.Secondary, 1):
		return &Refusal{Cause: CauseAggregateUnpriced, RetryAfter: 1,
			Message: "no prefill engine is live and every fallback engine is busy decoding; retry shortly"}
	case p.OwnPrefill > b:
		return &Refusal{Cause: CausePrompt,
			Message: "the prompt alone cannot be prefilled within the TTFT target: shorten the prompt or raise slo.ttft_s"}
	}
	return &Refusal{Cause: CauseQueue,
		RetryAfter: max(1, int(math.Ceil(price-elapsed-b))),
		Message:    "prefill queues cannot meet the TTFT target now; retry later"}
}

// chooseDecode chooses the decode engine for r. The producer is avoided
// whenever any other candidate exists; decode runs on it only when it is
// the only engine left. Aggregated, decode stays on the producer. Like
// choosePrefill it changes nothing.
func (c *Core) chooseDecode(r *Request, exclude map[string]bool) (Placement, *Refusal) {
	if p := c.byIID[r.producer]; c.opt.Aggregated && p != nil && p.Live && !exclude[p.IID] {
		return Placement{IID: p.IID, Cost: c.DecodeCost(r, p), MeetsSLO: true}, nil
	}
	cands, fallback := c.candidates(fleet.Decode, exclude)
	if len(cands) > 1 && r.producer != "" {
		// Iids are unique: dropping the producer leaves at least one other.
		cands = slices.DeleteFunc(cands, func(i *Instance) bool { return i.IID == r.producer })
	}
	if len(cands) == 0 {
		return Placement{}, &Refusal{Cause: CauseNoEngine, RetryAfter: 1, Message: "no engine can take the decode leg"}
	}
	cands, full := c.seated(cands, Decode)
	if full {
		return Placement{}, seatsFull(Decode)
	}
	best, k, met := cheapest(cands, func(i *Instance) Cost { return c.DecodeCost(r, i) },
		func(k Cost) bool { return k.Secondary <= 0 })
	return Placement{IID: best.IID, Cost: k, MeetsSLO: met, Fallback: fallback}, nil
}

// admitDecode is the decode admission check, reduced to what the core can
// project without seats: the request's KV must fit the live decode pool's
// token bounds (unless it would be alone), and some live decode engine
// must meet the TPOT target with it added to the batch it will meet (the
// legs now in prefill included, its handoff priced: decodeproject.go) —
// or it would miss the target even on an idle engine, in which case
// refusing it helps nobody.
func (c *Core) admitDecode(r *Request) *Refusal {
	if !c.opt.Predictive {
		return nil
	}
	pool := c.pool[:0]
	for _, i := range c.instances {
		if i.Live && i.Role == fleet.Decode {
			if i.prof.DecodeMaxRequests == nil {
				return nil // an engine without a decode domain cannot be projected
			}
			pool = append(pool, i)
		}
	}
	c.pool = pool
	if len(pool) == 0 {
		return nil
	}
	peak := r.InputLen + r.WantedLen
	limit, resident, bounded := 0, 0, true
	for _, i := range pool {
		lim, ok := i.prof.DecodeTokenLimit()
		bounded = bounded && ok
		limit += lim
		resident += i.decodeTokens
	}
	if bounded && resident > 0 && resident+peak > limit {
		return &Refusal{Cause: CauseKVCapacity, RetryAfter: 1,
			Message: "the decode pool's KV capacity is full; retry shortly"}
	}
	meets, idleMeets := false, false
	target, level := c.tpotTarget(r), c.decodeLevels(r, pool)
	for k, i := range pool {
		now := i.prof.TokenInterval(i.decodeTokens, len(i.decode)) * i.correction
		with := i.prof.TokenInterval(i.decodeTokens+r.kv(), len(i.decode)+1) * i.correction
		if level[k]+(with-now) <= target {
			meets = true
		}
		if i.prof.TokenInterval(r.kv(), 1)*i.correction <= target {
			idleMeets = true
		}
	}
	if !meets && idleMeets {
		return &Refusal{Cause: CauseTPOT, RetryAfter: 1,
			Message: "no decode engine can meet the TPOT target with this request now; retry shortly"}
	}
	return nil
}
