package fleet

import (
	"math"
	"regexp"
	"sort"
	"strings"
)

// Registered router-side adapters. Registering another only changes the
// "known ones are" lists.
var (
	knownConnectors = []string{"nixl"}
	knownDialects   = []string{"vllm"}
)

var imageDigestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Validate checks a Config built in code with every rule the loader
// applies to values (engine URLs and iids, the serving policy, the
// cross-field rules) and reports every failing rule together; source names
// the configuration in the error. Its one side effect: a valid config's
// engine.control_connections 0 becomes max(4, 2 × engines).
func (c *Config) Validate(source string) error {
	ps := newProblems(StageFields)
	c.checkEngines(ps)
	for _, p := range servingPolicyProblems(&c.Serving) {
		ps.add(p.Field, "%s", p.Message)
	}
	ps.stage = StageCross
	c.validate(ps)
	if err := ps.err(source); err != nil {
		return err
	}
	c.resolveControlConnections()
	return nil
}

// checkEngines is what the loader checks on each engine entry while
// reading it: endpoints, unique iids, at least one engine.
func (c *Config) checkEngines(ps *problems) {
	if len(c.Engines) == 0 {
		noEngines(ps)
	}
	seen := iidSeen{}
	for i, e := range c.Engines {
		p := "engines[" + itoa(i) + "]"
		checkEndpoint(ps, p+".url", true, e.URL)
		checkEndpoint(ps, p+".attestation_url", false, e.AttestationURL)
		seen.check(ps, i, e.IID)
	}
}

// validate runs the cross-field rules (stage 6). A rule that reads a field
// the reader could not read is skipped: its placeholder is not the
// operator's value.
func (c *Config) validate(ps *problems) {
	c.validateSLO(ps)
	c.validateController(ps)
	c.validateServing(ps)
	c.validateEngine(ps)
	c.validateRecovery(ps)
	c.validateProfiles(ps)
	c.validateHardware(ps)
	c.validateContract(ps)
}

func (c *Config) resolveControlConnections() {
	if c.Engine.ControlConnections == 0 {
		c.Engine.ControlConnections = max(4, 2*len(c.Engines))
	}
}

// Helpers for the recurring rule shapes.

func positive(ps *problems, field string, v float64) {
	if ps.ok(field) && !(v > 0) {
		ps.add(field, "%s must be positive, got %s", field, num(v))
	}
}

func nonnegative(ps *problems, field string, v float64) {
	if ps.ok(field) && !(v >= 0) {
		ps.add(field, "%s must be nonnegative, got %s", field, num(v))
	}
}

func atLeastOne(ps *problems, field string, v int) {
	if ps.ok(field) && v < 1 {
		ps.add(field, "%s must be at least 1, got %d", field, v)
	}
}

func (c *Config) validateSLO(ps *problems) {
	positive(ps, "slo.ttft_s", c.SLO.TTFT)
	positive(ps, "slo.tpot_s", c.SLO.TPOT)
}

func (c *Config) validateController(ps *problems) {
	k := c.Controller
	positive(ps, "controller.monitor_interval_s", k.MonitorIntervalS)
	atLeastOne(ps, "controller.monitor_failure_limit", k.MonitorFailureLimit)
	atLeastOne(ps, "controller.min_prefill", k.MinPrefill)
	atLeastOne(ps, "controller.min_decode", k.MinDecode)
	c.validateFloors(ps)
	atLeastOne(ps, "controller.flip_history", k.FlipHistory)

	t := k.Thresholds
	positive(ps, "controller.thresholds.expand", t.Expand)
	nonnegative(ps, "controller.thresholds.shrink", t.Shrink)
	if ps.ok("controller.thresholds.shrink", "controller.thresholds.expand") && t.Shrink >= t.Expand {
		ps.add("controller.thresholds.shrink", "controller.thresholds.shrink %s must be below controller.thresholds.expand %s: the band between them is where the pool holds still", num(t.Shrink), num(t.Expand))
	}
	nonnegative(ps, "controller.thresholds.cooldown_s", t.CooldownS)
	atLeastOne(ps, "controller.thresholds.sustained_intervals", t.SustainedIntervals)
	nonnegative(ps, "controller.thresholds.dwell_s", t.DwellS)
	if ps.ok("controller.thresholds.panic_ratio") && t.PanicRatio != 0 && !(t.PanicRatio >= 1) {
		ps.add("controller.thresholds.panic_ratio", "controller.thresholds.panic_ratio must be 0 (off) or at least 1, got %s", num(t.PanicRatio))
	}
	if ps.ok("controller.thresholds.flip_resident_guard") && t.FlipResidentGuard < 0 {
		ps.add("controller.thresholds.flip_resident_guard", "controller.thresholds.flip_resident_guard must be nonnegative, got %d", t.FlipResidentGuard)
	}
	validateReactive(ps, k.Reactive)
}

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

func validateReactive(ps *problems, r Reactive) {
	const p = "controller.reactive."
	positive(ps, p+"window_s", r.WindowS)
	atLeastOne(ps, p+"confirmations", r.Confirmations)
	positive(ps, p+"utilization", r.Utilization)
	if ps.ok(p+"utilization") && r.Utilization > 1 {
		ps.add(p+"utilization", "%sutilization is a fraction of an instance, got %s", p, num(r.Utilization))
	}
	atLeastOne(ps, p+"min_arrivals", r.MinArrivals)
	positive(ps, p+"demand_floor", r.DemandFloor)
	nonnegative(ps, p+"movement_margin", r.MovementMargin)
	if ps.ok(p+"movement_margin") && r.MovementMargin >= 1 {
		ps.add(p+"movement_margin", "%smovement_margin must be below 1, got %s", p, num(r.MovementMargin))
	}
	positive(ps, p+"step_s", r.StepS)
	positive(ps, p+"evidence_span_s", r.EvidenceSpanS)
	positive(ps, p+"evidence_max_span_s", r.EvidenceMaxSpanS)
	if ps.ok(p+"evidence_span_s", p+"evidence_max_span_s") && r.EvidenceSpanS > r.EvidenceMaxSpanS {
		ps.add(p+"evidence_span_s", "%sevidence_span_s %s exceeds %sevidence_max_span_s %s: the minimum evidence duration cannot outlast the bounded lookback", p, num(r.EvidenceSpanS), p, num(r.EvidenceMaxSpanS))
	}
	if ps.ok(p+"evidence_max_span_s", p+"window_s") && r.EvidenceMaxSpanS > r.WindowS {
		ps.add(p+"evidence_max_span_s", "%sevidence_max_span_s %s exceeds %swindow_s %s: a demand window shorter than the bounded evidence lookback cannot collect it", p, num(r.EvidenceMaxSpanS), p, num(r.WindowS))
	}
	atLeastOne(ps, p+"evidence_min_arrivals", r.EvidenceMinArrivals)
	nonnegative(ps, p+"demand_rise_tolerance", r.DemandRiseTolerance)
	positive(ps, p+"decode_correction_min", r.DecodeCorrectionMin)
	if ps.ok(p+"decode_correction_max", p+"decode_correction_min") && r.DecodeCorrectionMax < r.DecodeCorrectionMin {
		ps.add(p+"decode_correction_max", "%sdecode_correction_max must be at least %sdecode_correction_min", p, p)
	}
	if ps.ok(p+"decode_correction_alpha") && !(r.DecodeCorrectionAlpha > 0 && r.DecodeCorrectionAlpha <= 1) {
		ps.add(p+"decode_correction_alpha", "%sdecode_correction_alpha must be in (0, 1], got %s", p, num(r.DecodeCorrectionAlpha))
	}
	if ps.ok(p+"decode_correction_min_samples") && r.DecodeCorrectionMinSamples < 1 {
		ps.add(p+"decode_correction_min_samples", "%sdecode_correction_min_samples must be at least 1", p)
	}
}

func (c *Config) validateServing(ps *problems) {
	s := c.Serving
	if ps.ok("serving.admission") && s.Admission != AdmissionPredictive && s.Admission != AdmissionOpen {
		ps.add("serving.admission", "serving.admission must be 'predictive' or 'open', got '%s'", s.Admission)
	}
	nonnegative(ps, "serving.admission_margin", s.AdmissionMargin)
	atLeastOne(ps, "serving.max_connections", s.MaxConnections)
	positive(ps, "serving.request_timeout_s", s.RequestTimeoutS)
	positive(ps, "serving.prefill_timeout_s", s.PrefillTimeoutS)
	phaseLimit(ps, "serving.prefill_timeout_s", s.PrefillTimeoutS, s.RequestTimeoutS)
	nonnegative(ps, "serving.graceful_timeout_s", s.GracefulTimeoutS)
	if ps.ok("serving.graceful_timeout_s") && s.GracefulTimeoutS != math.Trunc(s.GracefulTimeoutS) {
		ps.add("serving.graceful_timeout_s", "serving.graceful_timeout_s must be whole seconds")
	}
}

// phaseLimit: a phase deadline longer than the whole request's is dead
// configuration.
func phaseLimit(ps *problems, field string, v, request float64) {
	if ps.ok(field, "serving.request_timeout_s") && v > request {
		ps.add(field, "%s %s exceeds serving.request_timeout_s %s: the request expires before this phase limit", field, num(v), num(request))
	}
}

// servingPolicyProblems checks the twelve queue/retry/body fields as one
// policy. Every field that fails its own check (1 to 4) is reported; a
// relation between fields (5 to 8) is checked only when each field it
// reads passed its own check.
func servingPolicyProblems(s *Serving) []Problem {
	var out []Problem
	bad := map[string]bool{}
	fail := func(name, msg string) {
		out = append(out, Problem{Field: "serving." + name, Message: msg})
		bad[name] = true
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"queue_capacity", s.QueueCapacity}, {"prefill_concurrency", s.PrefillConcurrent},
		{"decode_concurrency", s.DecodeConcurrent}, {"retry_budget", s.RetryBudget}} {
		if f.v < 0 {
			fail(f.name, "serving."+f.name+" must be a nonnegative integer")
		}
	}
	if s.MaxAttempts < 1 || s.MaxAttempts > 3 {
		fail("max_attempts", "serving.max_attempts must be an integer between 1 and 3")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max_request_bytes", s.MaxRequestBytes}, {"max_response_bytes", s.MaxResponseBytes}} {
		if f.v < 1 {
			fail(f.name, "serving."+f.name+" must be a positive integer")
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"queue_timeout_s", s.QueueTimeoutS}, {"handoff_timeout_s", s.HandoffTimeoutS},
		{"retry_base_s", s.RetryBaseS}, {"retry_cap_s", s.RetryCapS}, {"retry_replenish", s.RetryReplenish}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			fail(f.name, "serving."+f.name+" must be finite and nonnegative")
		}
	}
	readable := func(names ...string) bool {
		for _, n := range names {
			if bad[n] {
				return false
			}
		}
		return true
	}
	relation := func(name, msg string) {
		out = append(out, Problem{Field: "serving." + name, Message: msg})
	}
	if readable("queue_capacity", "queue_timeout_s", "prefill_concurrency", "decode_concurrency") &&
		s.QueueCapacity > 0 && (s.QueueTimeoutS <= 0 || s.PrefillConcurrent < 1 || s.DecodeConcurrent < 1) {
		relation("queue_capacity", "serving.queue_capacity requires positive queue_timeout_s, prefill_concurrency, and decode_concurrency from workload measurements")
	}
	if readable("retry_base_s", "retry_cap_s") && (s.RetryBaseS <= 0 || s.RetryCapS < s.RetryBaseS) {
		relation("retry_base_s", "serving retry delays require 0 < retry_base_s <= retry_cap_s")
	}
	if readable("retry_replenish") && s.RetryReplenish > 1 {
		relation("retry_replenish", "serving.retry_replenish must not exceed one credit per completion")
	}
	if readable("queue_capacity", "max_attempts", "handoff_timeout_s") &&
		(s.QueueCapacity > 0 || s.MaxAttempts > 1) && s.HandoffTimeoutS <= 0 {
		relation("handoff_timeout_s", "queued or retried serving requires positive serving.handoff_timeout_s below the verified backend KV lease")
	}
	return out
}

func (c *Config) validateEngine(ps *problems) {
	e := c.Engine
	registered(ps, "engine.connector", "connector", e.Connector, knownConnectors)
	registered(ps, "engine.dialect", "dialect", e.Dialect, knownDialects)
	positive(ps, "engine.chars_per_token", e.CharsPerToken)
	positive(ps, "engine.tokenize_timeout_s", e.TokenizeTimeoutS)
	if ps.ok("engine.control_connections") && e.ControlConnections < 0 {
		ps.add("engine.control_connections", "engine.control_connections must be nonnegative, got %d", e.ControlConnections)
	}
	positive(ps, "engine.pool_timeout_s", e.PoolTimeoutS)
	positive(ps, "engine.connect_timeout_s", e.ConnectTimeoutS)
	positive(ps, "engine.health_timeout_s", e.HealthTimeoutS)
	nonnegative(ps, "engine.decode_read_timeout_s", e.DecodeReadTimeoutS)
	positive(ps, "engine.first_token_timeout_s", e.FirstTokenTimeoutS)
	phaseLimit(ps, "engine.first_token_timeout_s", e.FirstTokenTimeoutS, c.Serving.RequestTimeoutS)
	if e.FirstTokenCalibrationPath != "" {
		// Refused rather than accepted and ignored: nothing in this build
		// writes or verifies the artifact (docs/fleet.md).
		ps.add("engine.first_token_calibration_path", "engine.first_token_calibration_path: first-token calibration artifacts are not supported by this build (it cannot verify them); remove the field or set it to \"\"")
	}
}

func registered(ps *problems, field, what, v string, known []string) {
	if !ps.ok(field) {
		return
	}
	for _, k := range known {
		if v == k {
			return
		}
	}
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	ps.add(field, "%s: unknown %s '%s': known ones are %s", field, what, v, strings.Join(sorted, ", "))
}

func (c *Config) validateRecovery(ps *problems) {
	r := c.Recovery
	atLeastOne(ps, "recovery.eject_after", r.EjectAfter)
	atLeastOne(ps, "recovery.readmit_every", r.ReadmitEvery)
	atLeastOne(ps, "recovery.liveness_misses", r.LivenessMisses)
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
	nonnegative(ps, "recovery.failure_quarantine_s", r.FailureQuarantineS)
	c.validateHealth(ps)
}

func (c *Config) validateHealth(ps *problems) {
	const p = "recovery.health."
	h := c.Recovery.Health
	if ps.ok(p+"window_s") && !(h.WindowS >= 1) {
		ps.add(p+"window_s", "%swindow_s must be at least 1, got %s", p, num(h.WindowS))
	}
	if ps.ok(p+"drift_band") && !(h.DriftBand > 1) {
		ps.add(p+"drift_band", "%sdrift_band must exceed 1.0, got %s", p, num(h.DriftBand))
	}
	atLeastOne(ps, p+"min_samples", h.MinSamples)
	if mi := c.Controller.MonitorIntervalS; ps.ok("controller.monitor_interval_s", p+"window_s", p+"min_samples") && mi > 0 && h.WindowS >= 1 {
		nominal := int(math.Floor(h.WindowS / mi))
		if h.MinSamples > nominal {
			ps.add(p+"min_samples", "%smin_samples %d exceeds the nominal %d samples per %swindow_s %s at controller.monitor_interval_s %s", p, h.MinSamples, nominal, p, num(h.WindowS), num(mi))
		}
	}
	atLeastOne(ps, p+"probation_windows", h.ProbationWindows)
	atLeastOne(ps, p+"evict_windows", h.EvictWindows)
	if ps.ok(p+"evict_windows", p+"probation_windows") && h.EvictWindows < h.ProbationWindows {
		ps.add(p+"evict_windows", "%sevict_windows %d is below %sprobation_windows %d: ejection is only reachable after probation", p, h.EvictWindows, p, h.ProbationWindows)
	}
	atLeastOne(ps, p+"recovery_windows", h.RecoveryWindows)
	nonnegative(ps, p+"probation_penalty_s", h.ProbationPenaltyS)
	nonnegative(ps, p+"relative_band", h.RelativeBand)
}

func (c *Config) validateProfiles(ps *problems) {
	p := c.Profiles
	positive(ps, "profiles.max_decode_fit_mape", p.MaxDecodeFitMAPE)
	positive(ps, "profiles.max_decode_cv_mape", p.MaxDecodeCVMAPE)
	if m := c.Controller.Reactive.MovementMargin; ps.ok("profiles.max_decode_fit_mape", "controller.reactive.movement_margin") && p.MaxDecodeFitMAPE > m {
		ps.add("profiles.max_decode_fit_mape", "profiles.max_decode_fit_mape %s exceeds controller.reactive.movement_margin %s", num(p.MaxDecodeFitMAPE), num(m))
	}
}

func (c *Config) validateHardware(ps *problems) {
	h := c.Hardware
	if h == nil {
		return
	}
	if ps.ok("hardware.accelerator") && h.Accelerator == "" {
		ps.add("hardware.accelerator", "hardware.accelerator is required")
	}
	if ps.ok("hardware.accelerators_per_engine") && h.AcceleratorsPerEngine < 1 {
		ps.add("hardware.accelerators_per_engine", "hardware.accelerators_per_engine must be at least 1")
	}
	switch {
	case !ps.ok("hardware.tensor_parallel"):
	case h.TensorParallel < 1:
		ps.add("hardware.tensor_parallel", "hardware.tensor_parallel must be at least 1")
	case ps.ok("hardware.accelerators_per_engine") && h.TensorParallel > h.AcceleratorsPerEngine:
		ps.add("hardware.tensor_parallel", "hardware.tensor_parallel cannot exceed hardware.accelerators_per_engine")
	}
}

func (c *Config) validateContract(ps *problems) {
	k := c.EngineContract
	if k == nil {
		return
	}
	const p = "engine_contract."
	if ps.ok(p+"vllm_version") && k.VLLMVersion == "" {
		ps.add(p+"vllm_version", "%svllm_version is required", p)
	}
	if ps.ok(p+"image_digest") && k.ImageDigest != "" && !imageDigestRE.MatchString(k.ImageDigest) {
		ps.add(p+"image_digest", "%simage_digest must be an immutable sha256:<64 hex> digest", p)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"nixl_connector_version", k.NIXLConnectorVersion}, {"kv_heads", k.KVHeads},
		{"head_size", k.HeadSize}, {"hidden_layers", k.HiddenLayers}} {
		if ps.ok(p+f.name) && f.v < 0 {
			ps.add(p+f.name, "%s%s must be nonnegative", p, f.name)
		}
	}
	if ps.ok(p+"connector") && k.Connector == "" {
		ps.add(p+"connector", "%sconnector is required", p)
	}
	if ps.ok(p+"transfer_mode") && k.TransferMode != "" && k.TransferMode != "pull" && k.TransferMode != "push" {
		ps.add(p+"transfer_mode", "%stransfer_mode must be 'pull' or 'push', got '%s'", p, k.TransferMode)
	}
	if ps.ok(p+"enforce_handshake_compat") && !k.EnforceHandshakeCompat {
		ps.add(p+"enforce_handshake_compat", "%senforce_handshake_compat must stay true; disabling vLLM's NIXL compatibility hash permits silent corruption", p)
	}
}
