package sched

import (
	"fmt"
	"math"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// splitScore is a split's projected SLO ratios: 1.0 is exactly at target.
type splitScore struct{ ttft, tpot, objective float64 }

// score projects a split of p prefill and d decode engines under demand
// dem, from the current split pCur/dCur and its observed loads.
func (k *controller) score(p, d, pCur, dCur int, dem demand, loads Loads, residentPrefillS float64) splitScore {
	if p <= 0 || d <= 0 {
		inf := math.Inf(1)
		return splitScore{inf, inf, inf}
	}
	util := k.cfg.Reactive.Utilization
	ttft := math.Max(dem.prefill/(float64(p)*util), loads.Prefill*float64(max(pCur, 1))/float64(p))
	ttft = math.Max(ttft, residentPrefillS/(float64(p)*k.c.opt.TTFT))
	tpot := math.Max(dem.decode/(float64(d)*util), loads.Decode*float64(max(dCur, 1))/float64(d))
	return splitScore{ttft, tpot, math.Max(ttft, tpot)}
}

func (k *controller) residentPrefill() float64 {
	s := 0.0
	for _, i := range k.c.instances {
		if i.Live {
			s += i.prefillPrice
		}
	}
	return s
}

// within: a and b agree to tol of the larger.
func within(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(a, b) }

// evaluate is one reactive evaluation (runtime.md §2.7): demand on two
// horizons, the current split scored against its neighbours, a rule that
// makes the move eligible, confirmations, then flip() and its guards.
func (k *controller) evaluate(now float64) *Decision {
	c, r, t := k.c, k.cfg.Reactive, k.cfg.Thresholds
	if now-k.lastEval < r.StepS {
		return nil
	}
	k.lastEval = now
	loads := k.loads
	k.trackPanic(loads)
	p, d, ap, ad := k.pools()
	if p+d < 2 {
		return nil
	}
	if (ap > 0 && p == 0) || (ad > 0 && d == 0) {
		return k.held(now, p, d, "fleet health is changing")
	}
	span := math.Min(r.WindowS, math.Max(r.StepS, now-k.start))
	long := k.estimate(now-span, span)
	if long.arrivals == 0 && k.residentPrefill() == 0 && k.residentDemand() == 0 {
		return nil // an idle fleet has nothing to decide
	}
	if long.arrivals < r.MinArrivals || long.prefill+long.decode < r.DemandFloor {
		return k.held(now, p, d, "insufficient demand history")
	}
	resident := k.residentPrefill()
	recoveryPrefill := math.Max(loads.Prefill, resident/(float64(p)*c.opt.TTFT))
	if !long.complete && math.Max(recoveryPrefill, loads.Decode) < t.Expand {
		return k.held(now, p, d, "incomplete demand requires observed phase pressure and fleet profiles")
	}
	confSpan := math.Min(span, r.StepS*float64(max(r.Confirmations, t.SustainedIntervals)))
	short := k.estimate(now-confSpan, confSpan)
	steady := within(short.prefill, long.prefill, r.DemandRiseTolerance) && within(short.decode, long.decode, r.DemandRiseTolerance)
	basis := long
	if !steady {
		basis = short // demand is moving: price the recent mix, not the window's
	}
	cur := k.score(p, d, p, d, basis, loads, resident)
	m := k.bestMove(p, d, basis, long, short, loads, resident, cur)
	if m == nil {
		return k.held(now, p, d, fmt.Sprintf("no adjacent split improves the worst projected SLO ratio %.3g by movement_margin", cur.objective))
	}
	return k.propose(now, p, d, m, cur, moveFacts{steady: steady, recoveryPrefill: recoveryPrefill, short: short, long: long})
}

// held is an evaluation that decided to keep the split; it resets the
// confirmations.
func (k *controller) held(now float64, p, d int, reason string) *Decision {
	k.proposal.count = 0
	return &Decision{At: now, Prefill: p, Decode: d, By: "reactive", Reason: reason, Result: ResultHeld}
}

// moveFacts is what evaluate learnt that propose's checks read.
type moveFacts struct {
	steady          bool
	recoveryPrefill float64
	short, long     demand
}

// propose takes the best move m from the p/d split through its rule, the
// consolidation gate, its confirmations and finally flip().
func (k *controller) propose(now float64, p, d int, m *move, cur splitScore, pr moveFacts) *Decision {
	rule, ok := k.rule(m, pr.steady, pr.recoveryPrefill)
	if !ok {
		return k.held(now, p, d, rule)
	}
	if m.target == fleet.Prefill {
		if gate := k.consolidationGate(now, pr.short, pr.long); gate != "" {
			k.proposal.count = 0
			return &Decision{At: now, Prefill: m.prefill, Decode: p + d - m.prefill, By: "reactive",
				Reason: "consolidation toward prefill waits for " + gate, Result: ResultBlocked, Details: m.details(cur)}
		}
	}
	if need := k.confirmationsNeeded(rule, m, cur); k.confirm(m.prefill, rule) < need {
		return &Decision{At: now, Prefill: m.prefill, Decode: p + d - m.prefill, By: "reactive", Result: ResultHeld,
			Reason: fmt.Sprintf("%s toward %s: confirmation %d of %d", rule, m.target, k.proposal.count, need), Details: m.details(cur)}
	}
	f, why := k.flip(now, m.target, "reactive", flipOpts{})
	dec := k.decision(now, "reactive", fmt.Sprintf("%s: projected worst SLO ratio %.3g → %.3g", rule, cur.objective, m.score.objective), f, why)
	dec.Prefill, dec.Decode = m.prefill, p+d-m.prefill
	dec.Details = m.details(cur)
	return dec
}

// move is a proposed adjacent split.
type move struct {
	prefill int
	target  fleet.Role
	score   splitScore
	delta   float64 // current objective − candidate objective
	source  float64 // the shrinking pool's projected ratio after the move
}

func (m *move) details(cur splitScore) map[string]float64 {
	return map[string]float64{"projected_ttft_ratio": m.score.ttft, "projected_tpot_ratio": m.score.tpot,
		"objective": m.score.objective, "objective_delta": m.delta, "current_objective": cur.objective,
		"source_ratio": m.source}
}

// bestMove scores p−1 and p+1 and returns the one that lowers the
// objective most by at least movement_margin. Moves toward prefill price
// decode on the envelope of both horizons, so a consolidation never
// starves decode on a momentary dip.
func (k *controller) bestMove(p, d int, basis, long, short demand, loads Loads, resident float64, cur splitScore) *move {
	n := p + d
	var best *move
	for _, cand := range []int{p - 1, p + 1} {
		if cand <= 0 || cand >= n {
			continue
		}
		dem, target := basis, fleet.Decode
		if cand > p {
			target = fleet.Prefill
			dem.decode = math.Max(long.decode, short.decode)
		}
		s := k.score(cand, n-cand, p, d, dem, loads, resident)
		m := &move{prefill: cand, target: target, score: s, delta: cur.objective - s.objective, source: s.ttft}
		if target == fleet.Prefill {
			m.source = s.tpot
		}
		if m.delta >= k.cfg.Reactive.MovementMargin && (best == nil || m.delta > best.delta) {
			best = m
		}
	}
	return best
}

// rule names what makes the move eligible, or says why none does.
func (k *controller) rule(m *move, steady bool, recoveryPrefill float64) (string, bool) {
	t := k.cfg.Thresholds
	switch {
	case m.target == fleet.Prefill && m.source > t.Shrink && recoveryPrefill >= t.Expand && m.delta > 0:
		return "mixed_pressure", true
	case m.source <= t.Shrink:
		return "source_shrink", true
	case m.source <= t.Expand && steady:
		return "steady_demand", true
	case m.source <= t.Expand:
		return "departure", true
	}
	return fmt.Sprintf("the %s pool would be over its target after the move (ratio %.3g)", other(m.target), m.source), false
}

func other(r fleet.Role) fleet.Role {
	if r == fleet.Prefill {
		return fleet.Decode
	}
	return fleet.Prefill
}

// consolidationGate is the D→P safety check: a closed arrival-evidence
// window and decode demand that is not rising. "" when open.
func (k *controller) consolidationGate(now float64, short, long demand) string {
	r := k.cfg.Reactive
	age := now - k.evidence.start
	closed := (age >= r.EvidenceSpanS && k.evidence.arrivals >= r.EvidenceMinArrivals) || age >= r.EvidenceMaxSpanS
	switch {
	case !closed:
		return "evidence"
	case short.decode > long.decode*(1+r.DemandRiseTolerance):
		return "trend"
	}
	return ""
}

// confirmationsNeeded: one for a source_shrink move toward a pool already
// at or over its target; otherwise the configured count.
func (k *controller) confirmationsNeeded(rule string, m *move, cur splitScore) int {
	dest := cur.tpot
	if m.target == fleet.Prefill {
		dest = cur.ttft
	}
	if rule == "source_shrink" && dest >= k.cfg.Thresholds.Expand {
		return 1
	}
	return max(k.cfg.Reactive.Confirmations, k.cfg.Thresholds.SustainedIntervals)
}

// confirm counts consecutive identical proposals.
func (k *controller) confirm(prefill int, rule string) int {
	if k.proposal.count > 0 && k.proposal.prefill == prefill && k.proposal.rule == rule {
		k.proposal.count++
	} else {
		k.proposal.prefill, k.proposal.rule, k.proposal.count = prefill, rule, 1
	}
	return k.proposal.count
}
