package sim

import (
	"fmt"
	"strconv"

	"github.com/narwhal-go/narwhal/internal/enginemodel"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// arrive sizes a request and takes its prefill step (sched.Core.Place:
// placement, the admission checks, dispatch), as the router does.
func (rn *runner) arrive(r *request, a Arrival, idx int) {
	*r = request{a: a, idx: idx, arrived: rn.now}
	r.rid, r.prefillID, r.decodeID = requestIDs(idx)
	rn.open++
	now := rn.nowS()
	if rn.f.PrefixCaching {
		r.blocks = appendBlockKeys(rn.spareBlockKeys(), a, idx, rn.f.Shape.BlockSize)
	}
	r.core = rn.d.arrive(now, r.rid, a.InputLen, a.OutputLen, rn.evidence(r))
	rn.placeFirst(r)
}

// placeFirst takes r's prefill step and starts its leg, puts it in the
// deadline queue (it places again when something frees, or at its
// deadline), or ends it refused.
func (rn *runner) placeFirst(r *request) {
	pl, ref := rn.d.place(rn.nowS(), r.rid)
	rn.observe() // the Arrow policy grows a pool inside the placement step
	switch {
	case ref != nil && ref.Wait && ref.Deadline > 0:
		if !r.waiting {
			r.waiting = true
			rn.q.push(event{at: max(rn.now, nanos(ref.Deadline)), kind: evDeadline, idx: r.idx})
		}
		return
	case ref != nil:
		r.waiting = false
		rn.refused(r, ref)
		return
	}
	r.waiting = false
	rn.startPrefill(r, pl)
}

// serveQueue places the requests waiting in the deadline queue again,
// earliest deadline first, after every event: as the router wakes its
// waiters whenever something frees. Each either goes, is refused, or
// waits on.
func (rn *runner) serveQueue() {
	if rn.d.core.QueueLen() == 0 {
		return
	}
	rn.waiting = rn.d.core.Queued(rn.waiting[:0])
	for _, rid := range rn.waiting {
		if r := &rn.reqs[ridIndex(rid)]; r.waiting && !r.done {
			rn.placeFirst(r)
		}
	}
}

// ridIndex is the trace index requestIDs named rid for ("r%07d").
func ridIndex(rid string) int {
	n := 0
	for _, ch := range rid[1:] {
		n = n*10 + int(ch-'0')
	}
	return n
}

// startPrefill sends r's first leg to the engine pl names.
func (rn *runner) startPrefill(r *request, pl sched.Placement) {
	a := r.a
	e := rn.byIID[pl.IID]
	r.prod = e
	if rn.arm.Aggregated {
		rn.add(e, enginemodel.Request{ID: r.rid, PromptTokens: a.InputLen, MaxTokens: a.OutputLen,
			CachedTokens: rn.hit(e, r)}, leg{r, legBoth})
		return
	}
	// The producer leg: the prompt and one token, KV held until pulled.
	rn.add(e, enginemodel.Request{ID: r.prefillID, PromptTokens: a.InputLen, MaxTokens: 1, Hold: true,
		CachedTokens: rn.hit(e, r)}, leg{r, legPrefill})
}

// requestIDs names request idx ("r%07d") and its two legs (rid+"/p",
// rid+"/d"), all three in one string's storage.
func requestIDs(idx int) (rid, prefill, decode string) {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], int64(idx), 10)
	b := make([]byte, 0, 2*(max(7, len(d))+3))
	for pass := 0; pass < 2; pass++ {
		b = append(b, 'r')
		for range 7 - len(d) {
			b = append(b, '0')
		}
		b = append(append(b, d...), '/', "pd"[pass])
	}
	all := string(b)
	n := len(all) / 2
	return all[:n-2], all[:n], all[n:]
}

// refused ends a request the core would not place: an admission check's
// refusal counts as refused, anything else (no engine, no seat) as failed.
func (rn *runner) refused(r *request, ref *sched.Refusal) {
	rn.res.RefusedBy[ref.Cause]++
	if admissionCause(ref.Cause) {
		rn.end(r, &rn.res.Refused)
		return
	}
	rn.end(r, &rn.res.Failed)
}

// admissionCause reports whether cause is an admission check's: the TTFT
// check's (prompt, queue, aggregate_unpriced) or the decode check's
// (kv_capacity, tpot).
func admissionCause(cause string) bool {
	switch cause {
	case sched.CausePrompt, sched.CauseQueue, sched.CauseAggregateUnpriced, sched.CauseKVCapacity, sched.CauseTPOT,
		sched.CauseDeadline, sched.CauseQueueFull:
		return true
	}
	return false
}

// add queues a leg on e's model; a request no engine could ever hold fails.
func (rn *runner) add(e *engine, q enginemodel.Request, l leg) {
	q.Ref = legRef(l)
	if err := e.m.Add(q); err != nil {
		rn.end(l.r, &rn.res.Failed)
		return
	}
	rn.kick(e)
}

// stepDone applies e's completed step and starts the next. A run of
// decode tokens goes to the core in one step (oneTokenEach), sent before
// anything else the step's events do: the core takes the same steps in
// the same order as with a call per token.
func (rn *runner) stepDone(e *engine) error {
	e.busy = false
	evs := e.m.Complete(e.step)
	// The run of tokens is collected on the stack: a handle written there
	// takes no write barrier while the collector marks. A longer run goes
	// in pieces, one after another, which the core takes alike.
	var run [tokenRun]*sched.Request
	n := 0
	reqs, now := rn.reqs, rn.now // neither moves while the step's events are read
	for k := range evs {
		ev := &evs[k]
		r, kind := &reqs[ev.Ref>>2], legKind(ev.Ref&3)
		if r.done {
			continue
		}
		if ev.Kind == enginemodel.Token && (kind == legDecode || kind == legBoth && ev.Index > 0) {
			r.counted(now)
			if n == len(run) {
				n = rn.sendTokens(e, run[:n])
			}
			run[n] = r.core
			n++
			continue
		}
		n = rn.sendTokens(e, run[:n])
		if err := rn.legEvent(e, leg{r, kind}, *ev); err != nil {
			return err
		}
	}
	rn.sendTokens(e, run[:n])
	rn.kick(e)
	return nil
}

// tokenRun is how many of a step's tokens stepDone collects before it
// sends them: most of the demo's decode batches, zeroed once per step.
const tokenRun = 64

// sendTokens reports the tokens collected on e to the core and returns
// how many are left to send: none.
func (rn *runner) sendTokens(e *engine, tokens []*sched.Request) int {
	if len(tokens) > 0 {
		rn.d.oneTokenEach(rn.nowS(), e.inst, tokens)
	}
	return 0
}

// legEvent is one event of a leg; decode tokens after the first are
// stepDone's own.
func (rn *runner) legEvent(e *engine, l leg, ev enginemodel.Event) error {
	r := l.r
	switch {
	case ev.Kind == enginemodel.Finished && l.kind == legPrefill:
		rn.stored(e, r) // the blocks stay held for the consumer
		rn.handoff(r, e)
	case ev.Kind == enginemodel.Token && l.kind == legBoth && ev.Index == 0:
		rn.stored(e, r)
		return rn.prefillHere(r, e)
	case ev.Kind == enginemodel.Finished:
		rn.finish(r)
	}
	return nil
}

// handoff is the producer's completion: TTFT ends here; the decode step
// places the leg and its KV is sent (no transfer when decode stays on the
// producer).
func (rn *runner) handoff(r *request, p *engine) {
	now := rn.nowS()
	r.prefillDone = rn.now
	rn.d.prefilled(now, p.iid, r.rid)
	pl, ref := rn.d.placeDecode(now, r.rid)
	rn.observe()
	if ref != nil {
		p.m.Release(r.prefillID)
		rn.refused(r, ref)
		return
	}
	d := rn.byIID[pl.IID]
	r.cons = d
	var delay int64
	if d != p {
		delay = nanos(rn.f.Link.TransferS(r.a.InputLen))
	}
	rn.q.push(event{at: rn.now + delay, kind: evKV, idx: r.idx})
}

// kvArrived frees the producer's held blocks and queues the decode leg.
func (rn *runner) kvArrived(r *request) {
	if r.done {
		return
	}
	r.prod.m.Release(r.prefillID)
	rn.kick(r.prod)
	rn.add(r.cons, enginemodel.Request{ID: r.decodeID, PromptTokens: r.a.InputLen, MaxTokens: r.a.OutputLen,
		CachedTokens: r.a.InputLen}, leg{r, legDecode})
}

// prefillHere is an aggregated request's first token: its prefill is done
// and its decode leg stays on the same engine request, which the core's
// aggregated decode step must agree with.
func (rn *runner) prefillHere(r *request, e *engine) error {
	now := rn.nowS()
	r.prefillDone = rn.now
	rn.d.prefilled(now, e.iid, r.rid)
	pl, ref := rn.d.placeDecode(now, r.rid)
	switch {
	case ref != nil:
		return fmt.Errorf("sim: sched refused aggregated request %s's decode on its producer %s: %s", r.rid, e.iid, ref.Message)
	case pl.IID != e.iid:
		return fmt.Errorf("sim: sched placed aggregated request %s's decode on %s, away from its producer %s", r.rid, pl.IID, e.iid)
	}
	r.cons = e
	rn.token(r, e)
	return nil
}

func (rn *runner) token(r *request, e *engine) {
	r.counted(rn.now)
	rn.d.tokens(rn.nowS(), e.iid, r.core, 1)
}

// counted is the simulator's own record of an output token at now.
func (r *request) counted(now int64) {
	r.tokens++
	r.last = now
}

// finish scores a completed request: TTFT is arrival to prefill done,
// TPOT (last token − prefill done)/(tokens − 1) (operations.md §8.1), and
// whether it met the SLO is the router's own rule, fleet.SLO.Met.
func (rn *runner) finish(r *request) {
	ttft := secs(r.prefillDone - r.arrived)
	rn.res.ttfts = append(rn.res.ttfts, ttft)
	var tpot *float64 // nil below two tokens: it cannot fail the target
	if r.tokens >= 2 {
		v := secs(r.last-r.prefillDone) / float64(r.tokens-1)
		rn.res.tpots = append(rn.res.tpots, v)
		tpot = &v
	}
	if !rn.slo.TTFTMet(ttft) {
		rn.res.TTFTMiss++
	}
	if !rn.slo.TPOTMet(tpot) {
		rn.res.TPOTMiss++
	}
	if rn.slo.Met(r.tokens >= r.a.OutputLen, &ttft, tpot) {
		rn.end(r, &rn.res.Met)
		return
	}
	rn.end(r, &rn.res.Late)
}

// end makes r terminal once, counting it in *bucket, and lets the core
// forget it.
func (rn *runner) end(r *request, bucket *int) {
	if r.done {
		return
	}
	r.done = true
	rn.dropBlocks(r)
	rn.open--
	*bucket++
	rn.d.finish(rn.nowS(), r.rid)
}
