package sched

import (
	"math"

	"github.com/narwhal-go/narwhal/internal/fleet"
)

// window is one monitor interval's observations of an engine.
type window struct {
	gapSum     float64 // Σ per-token gap × tokens
	gapTokens  int
	priceInteg float64 // ∫ resident prefill price dt since start, up to changed
	start      float64
	changed    float64
}

func (w *window) addGap(perToken float64, n int) {
	if !validGap(perToken) {
		return
	}
	if n == 1 { // ×1 is exact: the same sum without the multiply
		w.gapSum += perToken
	} else {
		w.gapSum += perToken * float64(n)
	}
	w.gapTokens += n
}

// validGap is what !(perToken < 0 || !finite(perToken)) answers in one
// comparison pair: negatives, ±Inf and NaN fail (every comparison with NaN
// is false).
func validGap(perToken float64) bool { return perToken >= 0 && perToken <= math.MaxFloat64 }

func (w *window) meanGap() (float64, bool) {
	if w.gapTokens == 0 {
		return 0, false
	}
	return w.gapSum / float64(w.gapTokens), true
}

// Loads are the SLO-relative pool loads: 1.0 is exactly at target.
type Loads struct {
	Prefill float64 `json:"prefill"`
	Decode  float64 `json:"decode"`
}

// EngineLoad is one engine's prefill and decode load.
type EngineLoad struct {
	Prefill float64 `json:"prefill"`
	Decode  float64 `json:"decode"`
}

// engineLoad computes i's loads at now from its live state and window.
func (c *Core) engineLoad(i *Instance, now float64) EngineLoad {
	var l EngineLoad
	price := i.prefillPrice
	if now > i.win.start {
		// The interval's mean resident price keeps the load from reading 0
		// between arrivals at low rates.
		integ := i.win.priceInteg + i.prefillPrice*(now-i.win.changed)
		price = math.Max(price, integ/(now-i.win.start))
	}
	l.Prefill = price / c.opt.TTFT
	if len(i.decode) == 0 {
		return l
	}
	observed, ok := i.win.meanGap()
	if !ok {
		observed = i.prof.TokenInterval(i.decodeTokens, len(i.decode)) * i.correction
	}
	floor := i.prof.TokenInterval(0, 0) * i.correction
	if floor >= c.opt.TPOT {
		l.Decode = observed / c.opt.TPOT
	} else {
		l.Decode = math.Max(0, observed-floor) / (c.opt.TPOT - floor)
	}
	return l
}

// PoolLoads averages engine loads over the live engines doing each phase:
// engines with that role plus engines still holding that phase's work
// after a role change.
func (c *Core) PoolLoads(now float64) Loads {
	var sum Loads
	var np, nd int
	for _, i := range c.instances {
		if !i.Live {
			continue
		}
		l := c.engineLoad(i, now)
		if i.Role == fleet.Prefill || len(i.prefill) > 0 {
			sum.Prefill += l.Prefill
			np++
		}
		if i.Role == fleet.Decode || len(i.decode) > 0 {
			sum.Decode += l.Decode
			nd++
		}
	}
	if np > 0 {
		sum.Prefill /= float64(np)
	}
	if nd > 0 {
		sum.Decode /= float64(nd)
	}
	return sum
}

// Roll closes the current monitor interval at now: it updates each
// engine's decode correction from the interval's measured token gaps and
// starts a fresh window.
func (c *Core) Roll(now float64) {
	for _, i := range c.instances {
		c.updateCorrection(i)
		i.win = window{start: now, changed: now}
	}
}

// integrate accumulates resident prefill price up to now; called before
// every change of it.
func (i *Instance) integrate(now float64) {
	if now > i.win.changed {
		i.win.priceInteg += i.prefillPrice * (now - i.win.changed)
		i.win.changed = now
	}
}

// updateCorrection smooths the ratio of live to profiled decode interval
// over windows with enough gaps, clamped to the configured band.
func (c *Core) updateCorrection(i *Instance) {
	mean, ok := i.win.meanGap()
	if !ok || i.win.gapTokens < c.opt.CorrectionSamples {
		return
	}
	predicted := i.prof.TokenInterval(i.decodeTokens, max(1, len(i.decode)))
	if predicted <= 0 {
		return
	}
	ratio := mean / predicted
	a := c.opt.CorrectionAlpha
	corr := (1-a)*i.correction + a*ratio
	i.correction = math.Min(c.opt.CorrectionMax, math.Max(c.opt.CorrectionMin, corr))
}
