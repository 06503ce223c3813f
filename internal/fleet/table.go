package fleet

import "math"

// The declaration of the fleet document: one line per field, in the order
// the reader reads them and the problem report lists them. The JSON name
// here must match the field's struct tag (TestTableMatchesStructTags).
//
// Adding a field: add it to its struct in config.go with its json tag,
// then one line here with its default and bounds. Reading, unknown-key
// detection, Defaults, Save, the range check and the field path in its
// messages follow. A rule between fields is a method hung on the field it
// follows in the report with andThen.

// fields is the top level. model, engines and slo are required: a missing
// one is reported with the top-level keys (stage 3).
func (c *Config) fields() []field {
	return []field{
		text("model", &c.Model, "").req(),
		{name: "engines", kind: kEngines, engines: &c.Engines, required: true},
		object("slo", c.sloFields).req(),
		object("controller", c.controllerFields),
		object("serving", c.Serving.fields).onRead(c.Serving.checkPolicy),
		object("engine", c.engineSettingsFields),
		object("recovery", c.recoveryFields),
		object("profiles", c.profilesFields).andThen(c.fitWithinMargin),
		optional("hardware", &c.Hardware, hardwareFields),
		optional("engine_contract", &c.EngineContract, contractFields),
	}
}

// identityKeys are the top-level keys checkIdentity reads.
var identityKeys = []string{"schema", "schema_version"}

// engineFields is one engines[] entry; iid and url are required.
func engineFields(e *Engine) []field {
	return []field{
		text("iid", &e.IID, "").req(),
		{name: "url", kind: kBaseURL, str: &e.URL, required: true},
		{name: "attestation_url", kind: kURL, str: &e.AttestationURL},
		{name: "role", kind: kRole, role: &e.Role, defStr: string(Decode)},
		flag("pin", &e.Pin, false),
	}
}

func (c *Config) sloFields() []field {
	s := &c.SLO
	return []field{
		number("ttft_s", &s.TTFT, 0, positive).req(),
		number("tpot_s", &s.TPOT, 0, positive).req(),
	}
}

func (c *Config) controllerFields() []field {
	k := &c.Controller
	return []field{
		number("monitor_interval_s", &k.MonitorIntervalS, 1.0, positive),
		integer("monitor_failure_limit", &k.MonitorFailureLimit, 5, atLeastOne),
		flag("advisory", &k.Advisory, false),
		integer("min_prefill", &k.MinPrefill, 1, atLeastOne),
		integer("min_decode", &k.MinDecode, 1, atLeastOne).andThen(c.validateFloors),
		integer("flip_history", &k.FlipHistory, 1000, atLeastOne),
		object("thresholds", c.thresholdsFields),
		object("reactive", c.reactiveFields),
	}
}

func (c *Config) thresholdsFields() []field {
	t := &c.Controller.Thresholds
	return []field{
		number("expand", &t.Expand, 1.0, positive),
		number("shrink", &t.Shrink, 0.5, nonnegative).andThen(c.shrinkBelowExpand),
		number("cooldown_s", &t.CooldownS, 10.0, nonnegative),
		integer("sustained_intervals", &t.SustainedIntervals, 3, atLeastOne),
		number("dwell_s", &t.DwellS, 0, nonnegative),
		number("panic_ratio", &t.PanicRatio, 0,
			bound{lo: 1, loEdge: inclusive, offAtZero: true, says: "must be 0 (off) or at least 1", got: true}),
		integer("flip_resident_guard", &t.FlipResidentGuard, 0, nonnegative),
	}
}

func (c *Config) reactiveFields() []field {
	r := &c.Controller.Reactive
	return []field{
		number("window_s", &r.WindowS, 120.0, positive),
		integer("confirmations", &r.Confirmations, 2, atLeastOne),
		number("utilization", &r.Utilization, 0.8, positive,
			bound{hi: 1, hiEdge: inclusive, says: "is a fraction of an instance", got: true}),
		integer("min_arrivals", &r.MinArrivals, 10, atLeastOne),
		number("demand_floor", &r.DemandFloor, 0.5, positive),
		number("movement_margin", &r.MovementMargin, 0.05, nonnegative,
			bound{hi: 1, hiEdge: exclusive, says: "must be below 1", got: true}),
		number("step_s", &r.StepS, 5.0, positive),
		number("evidence_span_s", &r.EvidenceSpanS, 60.0, positive),
		number("evidence_max_span_s", &r.EvidenceMaxSpanS, 120.0, positive).andThen(c.evidenceSpans),
		integer("evidence_min_arrivals", &r.EvidenceMinArrivals, 10, atLeastOne),
		number("demand_rise_tolerance", &r.DemandRiseTolerance, 0.25, nonnegative),
		number("decode_correction_min", &r.DecodeCorrectionMin, 0.5, positive),
		number("decode_correction_max", &r.DecodeCorrectionMax, 2.0).andThen(c.correctionOrder),
		number("decode_correction_alpha", &r.DecodeCorrectionAlpha, 0.2,
			bound{loEdge: exclusive, hi: 1, hiEdge: inclusive, says: "must be in (0, 1]", got: true}),
		integer("decode_correction_min_samples", &r.DecodeCorrectionMinSamples, 8, oneOrMore),
	}
}

// The serving policy's own bounds; checkPolicy reports them at stage 4
// with the policy's messages.
var (
	policyCount    = bound{loEdge: inclusive, says: "must be a nonnegative integer"}
	policyAttempts = bound{lo: 1, loEdge: inclusive, hi: 3, hiEdge: inclusive, says: "must be an integer between 1 and 3"}
	policyBytes    = bound{lo: 1, loEdge: inclusive, says: "must be a positive integer"}
	policyDelay    = bound{loEdge: inclusive, hi: math.Inf(1), hiEdge: exclusive, says: "must be finite and nonnegative"}
)

// fields of serving: the policy fields come last, in the order their
// problems are reported (counts, attempts, sizes, then delays).
func (s *Serving) fields() []field {
	return []field{
		text("admission", &s.Admission, AdmissionPredictive).with(oneOf(AdmissionPredictive, AdmissionOpen)),
		number("admission_margin", &s.AdmissionMargin, 0, nonnegative),
		integer("max_connections", &s.MaxConnections, 512, atLeastOne),
		number("request_timeout_s", &s.RequestTimeoutS, 600.0, positive),
		number("prefill_timeout_s", &s.PrefillTimeoutS, 120.0, positive).andThen(func(ps *problems) {
			phaseLimit(ps, "serving.prefill_timeout_s", s.PrefillTimeoutS, s.RequestTimeoutS)
		}),
		number("graceful_timeout_s", &s.GracefulTimeoutS, 30.0, nonnegative).with(wholeSeconds),
		texts("cors_origins", &s.CORSOrigins).with(origins),

		integer("queue_capacity", &s.QueueCapacity, 0, policyCount).asPolicy(),
		integer("prefill_concurrency", &s.PrefillConcurrent, 0, policyCount).asPolicy(),
		integer("decode_concurrency", &s.DecodeConcurrent, 0, policyCount).asPolicy(),
		integer("deadline_queue", &s.DeadlineQueue, 1024, policyCount).asPolicy(),
		integer("deadline_queue_kv_tokens", &s.DeadlineQueueKVTokens, 0, policyCount).asPolicy(),
		integer("retry_budget", &s.RetryBudget, 10, policyCount).asPolicy(),
		integer("max_attempts", &s.MaxAttempts, 1, policyAttempts).asPolicy(),
		integer("max_request_bytes", &s.MaxRequestBytes, 4<<20, policyBytes).asPolicy(),
		integer("max_response_bytes", &s.MaxResponseBytes, 16<<20, policyBytes).asPolicy(),
		number("queue_timeout_s", &s.QueueTimeoutS, 0, policyDelay).asPolicy(),
		number("handoff_timeout_s", &s.HandoffTimeoutS, 0, policyDelay).asPolicy(),
		number("retry_base_s", &s.RetryBaseS, 0.1, policyDelay).asPolicy(),
		number("retry_cap_s", &s.RetryCapS, 1.0, policyDelay).asPolicy(),
		number("retry_replenish", &s.RetryReplenish, 0.1, policyDelay).asPolicy(),
	}
}

func (c *Config) engineSettingsFields() []field {
	e := &c.Engine
	return []field{
		text("connector", &e.Connector, "nixl").with(registered("connector", knownConnectors)),
		text("dialect", &e.Dialect, "vllm").with(registered("dialect", knownDialects)),
		flag("tokenize", &e.Tokenize, true),
		number("chars_per_token", &e.CharsPerToken, 3.8, positive),
		number("tokenize_timeout_s", &e.TokenizeTimeoutS, 2.0, positive),
		text("engine_api_key_env", &e.EngineAPIKeyEnv, ""),
		// 0 is resolved to max(4, 2 × engines) once the document is valid.
		integer("control_connections", &e.ControlConnections, 0, nonnegative),
		number("pool_timeout_s", &e.PoolTimeoutS, 5.0, positive),
		number("connect_timeout_s", &e.ConnectTimeoutS, 10.0, positive),
		number("health_timeout_s", &e.HealthTimeoutS, 5.0, positive),
		number("decode_read_timeout_s", &e.DecodeReadTimeoutS, 60.0, nonnegative),
		number("first_token_timeout_s", &e.FirstTokenTimeoutS, 2.5, positive).andThen(func(ps *problems) {
			phaseLimit(ps, "engine.first_token_timeout_s", e.FirstTokenTimeoutS, c.Serving.RequestTimeoutS)
		}),
		text("first_token_calibration_path", &e.FirstTokenCalibrationPath, "").with(calibrationUnsupported),
	}
}

func (c *Config) recoveryFields() []field {
	r := &c.Recovery
	return []field{
		integer("eject_after", &r.EjectAfter, 3, atLeastOne),
		integer("readmit_every", &r.ReadmitEvery, 10, atLeastOne),
		integer("liveness_every", &r.LivenessEvery, 10),
		integer("liveness_misses", &r.LivenessMisses, 2, atLeastOne),
		text("engine_restart_policy", &r.EngineRestartPolicy, RestartIndividual).andThen(c.restartPolicy),
		number("failure_quarantine_s", &r.FailureQuarantineS, 0, nonnegative),
		text("state_path", &r.StatePath, "runs/state.json"),
		flag("resume", &r.Resume, false),
		object("health", c.healthFields),
		object("lease", c.leaseFields),
	}
}

func (c *Config) leaseFields() []field {
	l := &c.Recovery.Lease
	return []field{
		text("backend", &l.Backend, LeaseFile),
		text("etcd_endpoints", &l.EtcdEndpoints, ""),
		text("etcd_key", &l.EtcdKey, "/narwhal/router-lease"),
		text("kubernetes_namespace", &l.KubernetesNamespace, ""),
		text("kubernetes_name", &l.KubernetesName, "narwhal-router").andThen(c.leaseBackend),
	}
}

func (c *Config) healthFields() []field {
	h := &c.Recovery.Health
	return []field{
		number("window_s", &h.WindowS, 30.0, atLeastOne),
		number("drift_band", &h.DriftBand, 2.0,
			bound{lo: 1, loEdge: exclusive, says: "must exceed 1.0", got: true}),
		integer("min_samples", &h.MinSamples, 3, atLeastOne).andThen(c.samplesPerWindow),
		integer("probation_windows", &h.ProbationWindows, 3, atLeastOne),
		integer("evict_windows", &h.EvictWindows, 5, atLeastOne).andThen(c.evictAfterProbation),
		integer("recovery_windows", &h.RecoveryWindows, 3, atLeastOne),
		number("probation_penalty_s", &h.ProbationPenaltyS, 1.5, nonnegative),
		number("relative_band", &h.RelativeBand, 1.5, nonnegative),
	}
}

func (c *Config) profilesFields() []field {
	p := &c.Profiles
	return []field{
		text("path", &p.Path, "runs/profiles.json"),
		number("max_decode_fit_mape", &p.MaxDecodeFitMAPE, 0.05, positive),
		number("max_decode_cv_mape", &p.MaxDecodeCVMAPE, 0.13, positive),
	}
}

// hardwareFields: all three are required when the section is present.
func hardwareFields(h *Hardware) []field {
	return []field{
		text("accelerator", &h.Accelerator, "").req().mustSet(),
		integer("accelerators_per_engine", &h.AcceleratorsPerEngine, 0, oneOrMore).req(),
		integer("tensor_parallel", &h.TensorParallel, 0, oneOrMore).req().andThen(h.parallelFits),
	}
}

// contractFields are the 18 contract fields in the reference's table
// order. Missing and the fingerprint's canonical text walk them too.
func contractFields(k *EngineContract) []field {
	return []field{
		text("vllm_version", &k.VLLMVersion, "").mustSet(),
		text("image_digest", &k.ImageDigest, "").with(immutableDigest),
		text("nixl_version", &k.NIXLVersion, ""),
		integer("nixl_connector_version", &k.NIXLConnectorVersion, 0, notNegative),
		text("model_architecture", &k.ModelArchitecture, ""),
		text("model_dtype", &k.ModelDtype, ""),
		integer("kv_heads", &k.KVHeads, 0, notNegative),
		integer("head_size", &k.HeadSize, 0, notNegative),
		integer("hidden_layers", &k.HiddenLayers, 0, notNegative),
		text("attention_backend", &k.AttentionBackend, ""),
		text("kv_cache_dtype", &k.KVCacheDtype, ""),
		optFlag("cross_layers_blocks", &k.CrossLayersBlocks),
		optFlag("hybrid_kv_cache_manager", &k.HybridKVCacheManager),
		text("connector", &k.Connector, "NixlConnector").mustSet(),
		text("kv_role", &k.KVRole, ""),
		text("transfer_mode", &k.TransferMode, "").with(emptyOr("pull", "push")),
		text("speculative_config", &k.SpeculativeConfig, ""),
		flag("enforce_handshake_compat", &k.EnforceHandshakeCompat, true).with(staysTrue),
	}
}
