package simengine

import "time"

// jitterLocked spreads one step's duration uniformly over ±frac of it:
// the noisy engine (shared GPU, thermal throttling) whose timings no
// curve fits. frac ≤ 0 leaves d alone. Called with e.mu held (e.rng).
func (e *Engine) jitterLocked(d time.Duration, frac float64) time.Duration {
	if frac <= 0 {
		return d
	}
	frac = min(frac, 0.99) // start-time faults are not validated: never a negative step
	return time.Duration(float64(d) * (1 + frac*(2*e.rng.Float64()-1)))
}
