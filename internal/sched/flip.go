package sched

import (
	"fmt"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// flipOpts relax guards for floor repair.
type flipOpts struct {
	ignoreCooldown bool
	ignoreDwell    bool
}

const whyAdvisory = "advisory mode"

// flip moves one engine toward target (Arrow's Algorithm 3 with the
// current generation's guards): cooldown on P→D moves with the panic
// bypass, floors that keep each pool alive, pins, dwell, the resident
// guard on D→P donors, and advisory mode last. It returns the flip, or nil
// and why it was refused.
func (k *controller) flip(now float64, target fleet.Role, by string, o flipOpts) (*Flip, string) {
	why := k.flipGuards(now, target, o)
	var donor *Instance
	if why == "" {
		donor, why = k.donor(now, target, o)
	}
	if why == "" && k.cfg.Advisory {
		why = whyAdvisory
	}
	if why != "" {
		k.refuse(now, target, why)
		return nil, why
	}
	return k.apply(now, donor, target, by), ""
}

// flipGuards are the checks that do not depend on the donor.
func (k *controller) flipGuards(now float64, target fleet.Role, o flipOpts) string {
	t := k.cfg.Thresholds
	if target == fleet.Decode && !o.ignoreCooldown && now-k.lastP2D < t.CooldownS {
		if !k.panicNow(now) {
			return "decode cooldown has not elapsed"
		}
		k.bypasses++
	}
	source := fleet.Prefill
	if target == fleet.Prefill {
		source = fleet.Decode
	}
	live := 0
	for _, i := range k.c.instances {
		if i.Live && i.Role == source {
			live++
		}
	}
	switch {
	case live <= 1:
		return fmt.Sprintf("%s floor keeps the last live engine", source)
	case source == fleet.Prefill && live-1 < k.cfg.MinPrefill:
		return fmt.Sprintf("min_prefill keeps %d live prefill engines", k.cfg.MinPrefill)
	case source == fleet.Decode && live-1 < k.cfg.MinDecode:
		return fmt.Sprintf("min_decode keeps %d live decode engines", k.cfg.MinDecode)
	}
	return ""
}

// donor picks the source engine: unpinned, past its dwell, preferring one
// that still holds work of the target role (an unfinished earlier flip),
// then the least work of its own role, then the lowest iid.
func (k *controller) donor(now float64, target fleet.Role, o flipOpts) (*Instance, string) {
	var cands []*Instance
	for _, i := range k.c.instances {
		if i.Live && i.Role != target && !i.Pin {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return nil, "pins or nominated engine exclude every source candidate"
	}
	if dwell := k.cfg.Thresholds.DwellS; dwell > 0 && !o.ignoreDwell {
		kept := cands[:0]
		for _, i := range cands {
			if at, ok := k.lastFlip[i.IID]; !ok || now-at >= dwell {
				kept = append(kept, i)
			}
		}
		if cands = kept; len(cands) == 0 {
			return nil, "source engine dwell has not elapsed"
		}
	}
	var best *Instance
	var bestCost Cost
	for _, i := range cands {
		if k := flipCost(i); best == nil || k.less(bestCost) {
			best, bestCost = i, k
		}
	}
	if g := k.cfg.Thresholds.FlipResidentGuard; g > 0 && target == fleet.Prefill && len(best.decode) > g {
		return nil, fmt.Sprintf("lightest decode donor carries %d residents, above flip_resident_guard %d", len(best.decode), g)
	}
	return best, ""
}

// flipCost ranks donors: (0 when the engine still holds work of the other
// phase, else 1; the work of its current role).
func flipCost(i *Instance) Cost {
	if i.Role == fleet.Prefill {
		ind := 1.0
		if len(i.decode) > 0 {
			ind = 0
		}
		return Cost{ind, i.prefillPrice}
	}
	ind := 1.0
	if len(i.prefill) > 0 {
		ind = 0
	}
	return Cost{ind, float64(i.decodeTokens)}
}

// apply relabels the donor. Residents finish where they are; new
// placements follow the new label.
func (k *controller) apply(now float64, i *Instance, target fleet.Role, by string) *Flip {
	if prev, ok := k.lastTo[i.IID]; ok && prev != target {
		k.reversals++
	}
	i.Role = target
	k.lastFlip[i.IID], k.lastTo[i.IID] = now, target
	if target == fleet.Decode {
		k.lastP2D = now
	} else {
		k.riskEvent(now) // a D→P move needs fresh evidence before the next one
	}
	f := Flip{At: now, IID: i.IID, To: target, By: by, PrefillInflight: len(i.prefill), DecodeInflight: len(i.decode)}
	k.flips = append(k.flips, f)
	if limit := max(1, k.cfg.FlipHistory); len(k.flips) > limit {
		k.flips = append(k.flips[:0], k.flips[len(k.flips)-limit:]...)
	}
	k.flipCount[by+":"+string(target)]++
	k.proposal.count = 0
	return &f
}

func (k *controller) refuse(now float64, target fleet.Role, why string) {
	k.refused = append(k.refused, Refused{At: now, To: target, Why: why})
	if len(k.refused) > 20 {
		k.refused = append(k.refused[:0], k.refused[len(k.refused)-20:]...)
	}
}

// panicNow: decode has been far over its target while prefill idles, for
// sustained passes; live loads are re-read at now, the flip's time.
func (k *controller) panicNow(now float64) bool {
	t := k.cfg.Thresholds
	if t.PanicRatio <= 0 || k.panicRun < t.SustainedIntervals {
		return false
	}
	l := k.c.PoolLoads(now)
	return l.Decode >= t.PanicRatio*t.Expand && l.Prefill <= t.Shrink
}

// trackPanic counts consecutive passes in panic conditions.
func (k *controller) trackPanic(l Loads) {
	t := k.cfg.Thresholds
	if t.PanicRatio > 0 && l.Decode >= t.PanicRatio*t.Expand && l.Prefill <= t.Shrink {
		k.panicRun++
	} else {
		k.panicRun = 0
	}
}
