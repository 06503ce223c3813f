package fleet

import "math"

// The rules between fields, each hung in table.go on the field it follows
// in the problem report. A rule runs only when every field it reads was
// read (ps.ok).

// validateFloors is the role-floor rule: the floors must leave room for
// both roles, except that one engine with both floors at 1 serves
// aggregated inference.
func (c *Config) validateFloors(ps *problems) {
	p, d, n := c.Controller.MinPrefill, c.Controller.MinDecode, len(c.Engines)
	if !ps.ok("controller.min_prefill", "controller.min_decode", "engines") || p < 1 || d < 1 || p+d <= n || (n == 1 && p == 1 && d == 1) {
		return
	}
	if d == 1 {
		ps.add("controller.min_prefill", "controller.min_prefill %d permits zero decode engines in a fleet of %d; at most %d", p, n, n-1)
		return
	}
	ps.add("controller.min_prefill", "controller.min_prefill %d plus controller.min_decode %d exceeds the fleet size %d", p, d, n)
}

// shrinkBelowExpand: the band between the thresholds is where the pool
// holds still.
func (c *Config) shrinkBelowExpand(ps *problems) {
	t := c.Controller.Thresholds
	if ps.ok("controller.thresholds.shrink", "controller.thresholds.expand") && t.Shrink >= t.Expand {
		ps.add("controller.thresholds.shrink", "controller.thresholds.shrink %s must be below controller.thresholds.expand %s: the band between them is where the pool holds still", num(t.Shrink), num(t.Expand))
	}
}

// evidenceSpans: evidence_span_s ≤ evidence_max_span_s ≤ window_s.
func (c *Config) evidenceSpans(ps *problems) {
	const p = "controller.reactive."
	r := c.Controller.Reactive
	if ps.ok(p+"evidence_span_s", p+"evidence_max_span_s") && r.EvidenceSpanS > r.EvidenceMaxSpanS {
		ps.add(p+"evidence_span_s", "%sevidence_span_s %s exceeds %sevidence_max_span_s %s: the minimum evidence duration cannot outlast the bounded lookback", p, num(r.EvidenceSpanS), p, num(r.EvidenceMaxSpanS))
	}
	if ps.ok(p+"evidence_max_span_s", p+"window_s") && r.EvidenceMaxSpanS > r.WindowS {
		ps.add(p+"evidence_max_span_s", "%sevidence_max_span_s %s exceeds %swindow_s %s: a demand window shorter than the bounded evidence lookback cannot collect it", p, num(r.EvidenceMaxSpanS), p, num(r.WindowS))
	}
}

func (c *Config) correctionOrder(ps *problems) {
	const p = "controller.reactive."
	r := c.Controller.Reactive
	if ps.ok(p+"decode_correction_max", p+"decode_correction_min") && r.DecodeCorrectionMax < r.DecodeCorrectionMin {
		ps.add(p+"decode_correction_max", "%sdecode_correction_max must be at least %sdecode_correction_min", p, p)
	}
}

// phaseLimit: a phase deadline longer than the whole request's is dead
// configuration.
func phaseLimit(ps *problems, field string, v, request float64) {
	if ps.ok(field, "serving.request_timeout_s") && v > request {
		ps.add(field, "%s %s exceeds serving.request_timeout_s %s: the request expires before this phase limit", field, num(v), num(request))
	}
}

// checkPolicy checks the twelve queue/retry/body fields as one policy
// (stage 4, while reading and in Validate). Every field that fails its own
// bound (table.go) is reported; a relation between fields is checked only
// when each field it reads passed its own check.
func (s *Serving) checkPolicy(ps *problems) {
	bad := map[string]bool{}
	for _, f := range s.fields() {
		if !f.policy {
			continue
		}
		p := "serving." + f.name
		for _, b := range f.bounds {
			if b.fails(f.value()) {
				ps.add(p, "%s", b.message(p, f))
				bad[f.name] = true
			}
		}
	}
	s.policyRelations(ps, bad)
}

// policyRelations are the serving policy's rules between fields; bad holds
// the fields that failed their own check.
func (s *Serving) policyRelations(ps *problems, bad map[string]bool) {
	readable := func(names ...string) bool {
		for _, n := range names {
			if bad[n] {
				return false
			}
		}
		return true
	}
	if readable("queue_capacity", "queue_timeout_s", "prefill_concurrency", "decode_concurrency") &&
		s.QueueCapacity > 0 && (s.QueueTimeoutS <= 0 || s.PrefillConcurrent < 1 || s.DecodeConcurrent < 1) {
		ps.add("serving.queue_capacity", "serving.queue_capacity requires positive queue_timeout_s, prefill_concurrency, and decode_concurrency from workload measurements")
	}
	if readable("retry_base_s", "retry_cap_s") && (s.RetryBaseS <= 0 || s.RetryCapS < s.RetryBaseS) {
		ps.add("serving.retry_base_s", "serving retry delays require 0 < retry_base_s <= retry_cap_s")
	}
	if readable("retry_replenish") && s.RetryReplenish > 1 {
		ps.add("serving.retry_replenish", "serving.retry_replenish must not exceed one credit per completion")
	}
	if readable("queue_capacity", "max_attempts", "handoff_timeout_s") &&
		(s.QueueCapacity > 0 || s.MaxAttempts > 1) && s.HandoffTimeoutS <= 0 {
		ps.add("serving.handoff_timeout_s", "queued or retried serving requires positive serving.handoff_timeout_s below the verified backend KV lease")
	}
}

// restartPolicy: whole_wave restarts need a complete contract and a
// liveness probe.
func (c *Config) restartPolicy(ps *problems) {
	r := c.Recovery
	const policy = "recovery.engine_restart_policy"
	switch {
	case !ps.ok(policy), r.EngineRestartPolicy == RestartIndividual:
	case r.EngineRestartPolicy == RestartWholeWave:
		if ps.intact("engine_contract") && (c.EngineContract == nil || len(c.EngineContract.Missing()) > 0) {
			ps.add(policy, "%s whole_wave requires a complete engine_contract", policy)
		}
		if ps.ok("recovery.liveness_every") && r.LivenessEvery <= 0 {
			ps.add(policy, "%s whole_wave requires recovery.liveness_every > 0", policy)
		}
	default:
		ps.add(policy, "%s must be 'individual' or 'whole_wave'", policy)
	}
}

// samplesPerWindow: min_samples must fit in window_s / monitor_interval_s.
func (c *Config) samplesPerWindow(ps *problems) {
	const p = "recovery.health."
	h := c.Recovery.Health
	if mi := c.Controller.MonitorIntervalS; ps.ok("controller.monitor_interval_s", p+"window_s", p+"min_samples") && mi > 0 && h.WindowS >= 1 {
		nominal := int(math.Floor(h.WindowS / mi))
		if h.MinSamples > nominal {
			ps.add(p+"min_samples", "%smin_samples %d exceeds the nominal %d samples per %swindow_s %s at controller.monitor_interval_s %s", p, h.MinSamples, nominal, p, num(h.WindowS), num(mi))
		}
	}
}

func (c *Config) evictAfterProbation(ps *problems) {
	const p = "recovery.health."
	h := c.Recovery.Health
	if ps.ok(p+"evict_windows", p+"probation_windows") && h.EvictWindows < h.ProbationWindows {
		ps.add(p+"evict_windows", "%sevict_windows %d is below %sprobation_windows %d: ejection is only reachable after probation", p, h.EvictWindows, p, h.ProbationWindows)
	}
}

func (c *Config) fitWithinMargin(ps *problems) {
	p := c.Profiles
	if m := c.Controller.Reactive.MovementMargin; ps.ok("profiles.max_decode_fit_mape", "controller.reactive.movement_margin") && p.MaxDecodeFitMAPE > m {
		ps.add("profiles.max_decode_fit_mape", "profiles.max_decode_fit_mape %s exceeds controller.reactive.movement_margin %s", num(p.MaxDecodeFitMAPE), num(m))
	}
}

// parallelFits: an engine's tensor-parallel group fits its accelerators.
// A tensor_parallel below 1 is reported by its own bound instead.
func (h *Hardware) parallelFits(ps *problems) {
	if ps.ok("hardware.tensor_parallel", "hardware.accelerators_per_engine") && h.TensorParallel >= 1 && h.TensorParallel > h.AcceleratorsPerEngine {
		ps.add("hardware.tensor_parallel", "hardware.tensor_parallel cannot exceed hardware.accelerators_per_engine")
	}
}
