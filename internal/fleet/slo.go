package fleet

// The SLO's derived rules live beside its targets so that the router, the
// simulator and the metrics all read one definition (DESIGN rule 8: "the
// SLO was met" is decided in one place).

// TTFTMet reports whether a time to first token (seconds) is within
// slo.ttft_s; on the target counts as met.
func (s SLO) TTFTMet(ttft float64) bool { return ttft <= s.TTFT }

// TPOTMet reports whether a time per output token is within slo.tpot_s.
// A nil TPOT (fewer than two output tokens) does not fail the target
// (operations.md §8.1).
func (s SLO) TPOTMet(tpot *float64) bool { return tpot == nil || *tpot <= s.TPOT }

// Met is the per-request rule of operations.md §8.2 behind slo_met and
// narwhal_slo_met_total: the request completed its full output (the
// router: the stream ended with [DONE]; the simulator: every requested
// token was produced), its TTFT was measured and within target, and its
// TPOT is nil or within target.
func (s SLO) Met(complete bool, ttft, tpot *float64) bool {
	return complete && ttft != nil && s.TTFTMet(*ttft) && s.TPOTMet(tpot)
}

// SaturationThreshold (seconds) is what the router's loop lag and median
// sizing delay are compared with before it refuses new work as saturated:
// a quarter of the TTFT target (runtime.md §1, operations.md §7.4), so
// the router's own overhead cannot eat more of the budget than that.
func (s SLO) SaturationThreshold() float64 { return s.TTFT / 4 }
