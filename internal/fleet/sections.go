package fleet

import "strconv"

func itoa(n int) string { return strconv.Itoa(n) }

// readEngines reads the engine list. Entries that cannot be read are
// reported and dropped; iids are compared across every entry that names
// one (stage 5), whatever else is wrong with it.
func readEngines(top section, lookup LookupFunc) []Engine {
	v, present := top.m["engines"]
	list, ok := v.([]any)
	if !ok {
		if present {
			top.ps.add("engines", "engines must be a list")
		}
		return nil
	}
	if len(list) == 0 {
		noEngines(top.ps)
		return nil
	}
	engines := make([]Engine, 0, len(list))
	seen := iidSeen{}
	for i, item := range list {
		if e, ok := readEngine(top.ps, i, item, lookup, seen); ok {
			engines = append(engines, e)
		}
	}
	if len(engines) < len(list) {
		// Rules over the engine count (the role floors) would judge a
		// shorter fleet than the one written.
		top.ps.broken["engines"] = true
	}
	return engines
}

func readEngine(ps *problems, i int, item any, lookup LookupFunc, seen iidSeen) (Engine, bool) {
	path := "engines[" + itoa(i) + "]"
	m, ok := item.(map[string]any)
	if !ok {
		ps.add(path, "%s must be an object", path)
		return Engine{}, false
	}
	s := section{path: path, m: m, ps: ps}
	s.unknownKeys("iid", "url", "attestation_url", "role", "pin")
	if iid, isStr := m["iid"].(string); isStr {
		seen.check(ps, i, iid)
	}
	missing := false
	for _, k := range []string{"iid", "url"} {
		if _, present := m[k]; !present {
			ps.add(s.field(k), "%s is missing '%s'", path, k)
			missing = true
		}
	}
	if missing {
		return Engine{}, false
	}
	e := Engine{Role: Decode}
	s.str("iid", &e.IID)
	e.URL = readEndpoint(s, "url", lookup)
	e.AttestationURL = readEndpoint(s, "attestation_url", lookup)
	readRole(s, &e.Role)
	s.boolean("pin", &e.Pin)
	return e, true
}

// iidSeen maps each instance id to the index of the entry that used it
// first.
type iidSeen map[string]int

// check reports engines[i] when its iid was used before (stage 5).
func (seen iidSeen) check(ps *problems, i int, iid string) {
	first, dup := seen[iid]
	if !dup {
		seen[iid] = i
		return
	}
	f := "engines[" + itoa(i) + "].iid"
	ps.addAt(StageEngineIDs, f, "%s repeats an instance id '%s' (first used by engines[%d]); give every engine its own iid", f, iid, first)
}

// noEngines keeps the reference's sentence, "P declares no engines".
func noEngines(ps *problems) {
	ps.addAt(StageEngineIDs, "engines", "declares no engines")
	ps.list[len(ps.list)-1].continues = true
	ps.broken["engines"] = true // nothing to count for the role floors
}

func readRole(s section, dst *Role) {
	v, present := s.m["role"]
	if !present {
		return
	}
	r, isStr := v.(string)
	if !isStr {
		s.ps.add(s.field("role"), "%s must be a string", s.field("role"))
		return
	}
	if r != string(Prefill) && r != string(Decode) {
		s.ps.add(s.field("role"), "%s must be 'prefill' or 'decode', got '%s'", s.field("role"), r)
		return
	}
	*dst = Role(r)
}

func readSLO(top section, slo *SLO) {
	s, ok := top.object("slo", true)
	if !ok {
		return
	}
	s.unknownKeys("ttft_s", "tpot_s")
	s.required("ttft_s", func(k string) { s.number(k, &slo.TTFT) })
	s.required("tpot_s", func(k string) { s.number(k, &slo.TPOT) })
}

func readController(top section, c *Controller) {
	s, ok := top.object("controller", false)
	if !ok {
		return
	}
	s.unknownKeys("monitor_interval_s", "monitor_failure_limit", "advisory", "min_prefill",
		"min_decode", "flip_history", "thresholds", "reactive")
	s.number("monitor_interval_s", &c.MonitorIntervalS)
	s.integer("monitor_failure_limit", &c.MonitorFailureLimit)
	s.boolean("advisory", &c.Advisory)
	s.integer("min_prefill", &c.MinPrefill)
	s.integer("min_decode", &c.MinDecode)
	s.integer("flip_history", &c.FlipHistory)
	if t, ok := s.object("thresholds", false); ok {
		readThresholds(t, &c.Thresholds)
	}
	if r, ok := s.object("reactive", false); ok {
		readReactive(r, &c.Reactive)
	}
}

func readThresholds(s section, t *Thresholds) {
	s.unknownKeys("expand", "shrink", "cooldown_s", "sustained_intervals", "dwell_s",
		"panic_ratio", "flip_resident_guard")
	s.number("expand", &t.Expand)
	s.number("shrink", &t.Shrink)
	s.number("cooldown_s", &t.CooldownS)
	s.integer("sustained_intervals", &t.SustainedIntervals)
	s.number("dwell_s", &t.DwellS)
	s.number("panic_ratio", &t.PanicRatio)
	s.integer("flip_resident_guard", &t.FlipResidentGuard)
}

func readReactive(s section, r *Reactive) {
	s.unknownKeys("window_s", "confirmations", "utilization", "min_arrivals", "demand_floor",
		"movement_margin", "step_s", "evidence_span_s", "evidence_max_span_s",
		"evidence_min_arrivals", "demand_rise_tolerance", "decode_correction_min",
		"decode_correction_max", "decode_correction_alpha", "decode_correction_min_samples")
	s.number("window_s", &r.WindowS)
	s.integer("confirmations", &r.Confirmations)
	s.number("utilization", &r.Utilization)
	s.integer("min_arrivals", &r.MinArrivals)
	s.number("demand_floor", &r.DemandFloor)
	s.number("movement_margin", &r.MovementMargin)
	s.number("step_s", &r.StepS)
	s.number("evidence_span_s", &r.EvidenceSpanS)
	s.number("evidence_max_span_s", &r.EvidenceMaxSpanS)
	s.integer("evidence_min_arrivals", &r.EvidenceMinArrivals)
	s.number("demand_rise_tolerance", &r.DemandRiseTolerance)
	s.number("decode_correction_min", &r.DecodeCorrectionMin)
	s.number("decode_correction_max", &r.DecodeCorrectionMax)
	s.number("decode_correction_alpha", &r.DecodeCorrectionAlpha)
	s.integer("decode_correction_min_samples", &r.DecodeCorrectionMinSamples)
}

func readServing(top section, v *Serving) {
	s, ok := top.object("serving", false)
	if !ok {
		return
	}
	s.unknownKeys("admission", "admission_margin", "max_connections", "request_timeout_s",
		"prefill_timeout_s", "graceful_timeout_s", "queue_capacity", "queue_timeout_s",
		"prefill_concurrency", "decode_concurrency", "handoff_timeout_s", "max_attempts",
		"retry_base_s", "retry_cap_s", "retry_budget", "retry_replenish",
		"max_request_bytes", "max_response_bytes")
	s.str("admission", &v.Admission)
	s.number("admission_margin", &v.AdmissionMargin)
	s.integer("max_connections", &v.MaxConnections)
	s.number("request_timeout_s", &v.RequestTimeoutS)
	s.number("prefill_timeout_s", &v.PrefillTimeoutS)
	s.number("graceful_timeout_s", &v.GracefulTimeoutS)

	// The policy fields: a wrong kind becomes a value its own check refuses.
	s.policyInt("queue_capacity", &v.QueueCapacity, -1)
	s.policyNumber("queue_timeout_s", &v.QueueTimeoutS)
	s.policyInt("prefill_concurrency", &v.PrefillConcurrent, -1)
	s.policyInt("decode_concurrency", &v.DecodeConcurrent, -1)
	s.policyNumber("handoff_timeout_s", &v.HandoffTimeoutS)
	s.policyInt("max_attempts", &v.MaxAttempts, 0)
	s.policyNumber("retry_base_s", &v.RetryBaseS)
	s.policyNumber("retry_cap_s", &v.RetryCapS)
	s.policyInt("retry_budget", &v.RetryBudget, -1)
	s.policyNumber("retry_replenish", &v.RetryReplenish)
	s.policyInt("max_request_bytes", &v.MaxRequestBytes, 0)
	s.policyInt("max_response_bytes", &v.MaxResponseBytes, 0)
	for _, p := range servingPolicyProblems(v) {
		s.ps.add(p.Field, "%s", p.Message)
	}
}

func readEngineSettings(top section, e *EngineSettings) {
	s, ok := top.object("engine", false)
	if !ok {
		return
	}
	s.unknownKeys("connector", "dialect", "tokenize", "chars_per_token", "tokenize_timeout_s",
		"engine_api_key_env", "control_connections", "pool_timeout_s", "connect_timeout_s",
		"health_timeout_s", "decode_read_timeout_s", "first_token_timeout_s",
		"first_token_calibration_path")
	s.str("connector", &e.Connector)
	s.str("dialect", &e.Dialect)
	s.boolean("tokenize", &e.Tokenize)
	s.number("chars_per_token", &e.CharsPerToken)
	s.number("tokenize_timeout_s", &e.TokenizeTimeoutS)
	s.str("engine_api_key_env", &e.EngineAPIKeyEnv)
	s.integer("control_connections", &e.ControlConnections)
	s.number("pool_timeout_s", &e.PoolTimeoutS)
	s.number("connect_timeout_s", &e.ConnectTimeoutS)
	s.number("health_timeout_s", &e.HealthTimeoutS)
	s.number("decode_read_timeout_s", &e.DecodeReadTimeoutS)
	s.number("first_token_timeout_s", &e.FirstTokenTimeoutS)
	s.str("first_token_calibration_path", &e.FirstTokenCalibrationPath)
}

func readRecovery(top section, r *Recovery) {
	s, ok := top.object("recovery", false)
	if !ok {
		return
	}
	s.unknownKeys("eject_after", "readmit_every", "liveness_every", "liveness_misses",
		"engine_restart_policy", "failure_quarantine_s", "state_path", "resume", "health")
	s.integer("eject_after", &r.EjectAfter)
	s.integer("readmit_every", &r.ReadmitEvery)
	s.integer("liveness_every", &r.LivenessEvery)
	s.integer("liveness_misses", &r.LivenessMisses)
	s.str("engine_restart_policy", &r.EngineRestartPolicy)
	s.number("failure_quarantine_s", &r.FailureQuarantineS)
	s.str("state_path", &r.StatePath)
	s.boolean("resume", &r.Resume)
	if h, ok := s.object("health", false); ok {
		readHealth(h, &r.Health)
	}
}

func readHealth(s section, h *Health) {
	s.unknownKeys("window_s", "drift_band", "min_samples", "probation_windows",
		"evict_windows", "recovery_windows", "probation_penalty_s", "relative_band")
	s.number("window_s", &h.WindowS)
	s.number("drift_band", &h.DriftBand)
	s.integer("min_samples", &h.MinSamples)
	s.integer("probation_windows", &h.ProbationWindows)
	s.integer("evict_windows", &h.EvictWindows)
	s.integer("recovery_windows", &h.RecoveryWindows)
	s.number("probation_penalty_s", &h.ProbationPenaltyS)
	s.number("relative_band", &h.RelativeBand)
}

func readProfiles(top section, p *Profiles) {
	s, ok := top.object("profiles", false)
	if !ok {
		return
	}
	s.unknownKeys("path", "max_decode_fit_mape", "max_decode_cv_mape")
	s.str("path", &p.Path)
	s.number("max_decode_fit_mape", &p.MaxDecodeFitMAPE)
	s.number("max_decode_cv_mape", &p.MaxDecodeCVMAPE)
}

func readHardware(top section) *Hardware {
	s, ok := top.object("hardware", false)
	if !ok {
		return nil
	}
	s.unknownKeys("accelerator", "accelerators_per_engine", "tensor_parallel")
	h := &Hardware{}
	s.required("accelerator", func(k string) { s.str(k, &h.Accelerator) })
	s.required("accelerators_per_engine", func(k string) { s.integer(k, &h.AcceleratorsPerEngine) })
	s.required("tensor_parallel", func(k string) { s.integer(k, &h.TensorParallel) })
	return h
}

func readContract(top section) *EngineContract {
	s, ok := top.object("engine_contract", false)
	if !ok {
		return nil
	}
	s.unknownKeys(contractKeys...)
	c := DefaultContract()
	s.str("vllm_version", &c.VLLMVersion)
	s.str("image_digest", &c.ImageDigest)
	s.str("nixl_version", &c.NIXLVersion)
	s.integer("nixl_connector_version", &c.NIXLConnectorVersion)
	s.str("model_architecture", &c.ModelArchitecture)
	s.str("model_dtype", &c.ModelDtype)
	s.integer("kv_heads", &c.KVHeads)
	s.integer("head_size", &c.HeadSize)
	s.integer("hidden_layers", &c.HiddenLayers)
	s.str("attention_backend", &c.AttentionBackend)
	s.str("kv_cache_dtype", &c.KVCacheDtype)
	s.optBool("cross_layers_blocks", &c.CrossLayersBlocks)
	s.optBool("hybrid_kv_cache_manager", &c.HybridKVCacheManager)
	s.str("connector", &c.Connector)
	s.str("kv_role", &c.KVRole)
	s.str("transfer_mode", &c.TransferMode)
	s.str("speculative_config", &c.SpeculativeConfig)
	s.boolean("enforce_handshake_compat", &c.EnforceHandshakeCompat)
	return &c
}

// contractKeys are the 18 contract fields in table order.
var contractKeys = []string{"vllm_version", "image_digest", "nixl_version",
	"nixl_connector_version", "model_architecture", "model_dtype", "kv_heads", "head_size",
	"hidden_layers", "attention_backend", "kv_cache_dtype", "cross_layers_blocks",
	"hybrid_kv_cache_manager", "connector", "kv_role", "transfer_mode", "speculative_config",
	"enforce_handshake_compat"}
