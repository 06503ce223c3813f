package sched

import "github.com/narwhal-go/narwhal/internal/fleet"

// Arrow's Algorithm 2: every monitor interval, move one engine P→D while
// decode is overloaded (or prefill idles below shrink while decode is at
// or above it) for sustained intervals. For the simulator's comparison.
func (k *controller) arrowMonitor(now float64) *Decision {
	t := k.cfg.Thresholds
	l := k.loads
	k.trackPanic(l)
	if l.Decode >= t.Expand || (l.Prefill <= t.Shrink && t.Shrink <= l.Decode) {
		k.sustained++
	} else {
		k.sustained = 0
	}
	if k.sustained < t.SustainedIntervals {
		return nil
	}
	f, why := k.flip(now, fleet.Decode, "algorithm2", flipOpts{})
	if f != nil {
		k.sustained = 0
	}
	return k.decision(now, "algorithm2", "decode pool load stayed above its trigger", f, why)
}

// arrowGrow is Algorithm 1 step 3, the one role change a placement step
// makes, and only under PolicyArrow: when no engine of the leg's pool met
// the SLO (p), try to grow that pool by one engine and place the leg on it.
// It returns p unchanged when the policy is another or no engine moved.
func (c *Core) arrowGrow(now float64, phase Phase, r *Request, exclude map[string]bool, p Placement) Placement {
	j := c.arrowInline(now, phase, exclude)
	if j == nil {
		return p
	}
	if phase == Prefill {
		k := c.prefillCost(r, j, p.Fallback)
		return c.prefillOn(r, j, k, k.Secondary <= c.opt.TTFT, p.Fallback)
	}
	k := c.DecodeCost(r, j)
	return Placement{IID: j.IID, Cost: k, MeetsSLO: k.Secondary <= 0, Fallback: p.Fallback}
}

// arrowInline flips one engine toward the leg's pool at now and returns
// it, or nil. Moves toward prefill only while decode load is below shrink.
func (c *Core) arrowInline(now float64, phase Phase, exclude map[string]bool) *Instance {
	if c.opt.Policy != PolicyArrow {
		return nil
	}
	k := c.ctl
	target := fleet.Decode
	if phase == Prefill {
		if c.PoolLoads(now).Decode >= k.cfg.Thresholds.Shrink {
			k.refuse(now, fleet.Prefill, "decode load >= shrink")
			return nil
		}
		target = fleet.Prefill
	}
	f, _ := k.flip(now, target, "algorithm1", flipOpts{})
	if f == nil || exclude[f.IID] {
		return nil
	}
	k.decisions["algorithm1:"+ResultApplied]++
	return c.byIID[f.IID]
}
