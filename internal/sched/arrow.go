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

// arrowInline is Algorithm 1 step 3: when no engine of the leg's pool meets
// the SLO, try to grow that pool by one engine and place the leg on it.
// Moves toward prefill only while decode load is below shrink.
func (c *Core) arrowInline(phase Phase, exclude map[string]bool) *Instance {
	if c.opt.Policy != PolicyArrow {
		return nil
	}
	k := c.ctl
	target := fleet.Decode
	if phase == Prefill {
		if c.PoolLoads(c.now).Decode >= k.cfg.Thresholds.Shrink {
			k.refuse(c.now, fleet.Prefill, "decode load >= shrink")
			return nil
		}
		target = fleet.Prefill
	}
	f, _ := k.flip(c.now, target, "algorithm1", flipOpts{})
	if f == nil || exclude[f.IID] {
		return nil
	}
	k.decisions["algorithm1:"+ResultApplied]++
	return c.byIID[f.IID]
}
