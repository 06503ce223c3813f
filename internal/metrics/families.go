package metrics

import (
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
)

func (m *Metrics) buildInfo(b builder, cfg *fleet.Config) {
	b.gaugeVec("narwhal_contract_info", "Metrics contract this router exports (narwhal.metrics).",
		"contract", "version").WithLabelValues("metrics", ContractVersion).Set(1)
	b.gaugeVec("narwhal_admission_info", "Admission mode (serving.admission): 1 on the active mode.",
		"mode").WithLabelValues(cfg.Serving.Admission).Set(1)
	b.gauge("narwhal_admission_margin", "serving.admission_margin: TTFT budget = slo.ttft_s × (1 + margin).").
		Set(cfg.Serving.AdmissionMargin)
	slo := b.gaugeVec("narwhal_slo_seconds", "Configured latency budgets in seconds (slo.ttft_s, slo.tpot_s).",
		"metric", "slo")
	slo.WithLabelValues("ttft", SLOLabel(cfg.SLO.TTFT)).Set(cfg.SLO.TTFT)
	slo.WithLabelValues("tpot", SLOLabel(cfg.SLO.TPOT)).Set(cfg.SLO.TPOT)
	m.RouterReady = b.gauge("narwhal_router_ready", "1 while the router admits requests (ready and lease held), else 0.")
	m.LeaseEpoch = b.gauge("narwhal_router_lease_epoch", "Router lease epoch; 0 without fencing.")
	m.LeaseReacquired = b.counter("narwhal_lease_reacquired_total", "Router lease claims that ended a fence (a lost lease, a refused claim at start, a failed takeover).")
	m.ProfileReloads = b.counterVec("narwhal_profile_reloads_total", "Re-reads of the profile store (profiles.path changed, or POST /narwhal/profiles/reload): taken, or refused (the store before stays).", "result")
	for _, r := range []string{"taken", "refused"} {
		m.ProfileReloads.WithLabelValues(r)
	}
}

func (m *Metrics) buildOutcomes(b builder) {
	m.Offered = b.counter("narwhal_offered_total", "Original completion requests, including early refusals.")
	m.UnsizedOffered = b.counter("narwhal_unsized_offered_total", "Original requests that ended before input sizing.")
	m.Served = b.counter("narwhal_served_total", "Requests completed without error.")
	m.SLOMet = b.counter("narwhal_slo_met_total", "Completed requests within both the TTFT and TPOT targets.")
	m.Cancelled = b.counter("narwhal_cancelled_total", "Requests abandoned by the client.")
	m.Invalid = b.counter("narwhal_invalid_requests_total", "Malformed or unsupported requests (400, 404, 413).")
	m.Unserved = b.counter("narwhal_unserved_total", "Phase placements with no SLO-eligible candidate.")
	m.failed = b.counterVec("narwhal_failed_total", "Requests that ended in error, by reason.", "reason")
	m.expired = b.counterVec("narwhal_expired_total", "Requests that ran out of time, by reason.", "reason")
	m.refused = b.counterVec("narwhal_refused_total", "Predictive admission refusals (HTTP 429), by cause.", "cause")
	m.rejected = b.counterVec("narwhal_rejected_total", "Capacity (429) and readiness (503) rejections, by reason.", "reason")
	seed(m.failed, journal.FailedReasons()...)
	seed(m.expired, journal.ExpiredReasons()...)
	seed(m.refused, journal.RefusedCauses()...)
	seed(m.rejected, journal.RejectedReasons()...)
}

func (m *Metrics) buildAttempts(b builder, cfg *fleet.Config) {
	m.PrefillAttempts = b.counter("narwhal_prefill_attempts_total", "Prefill HTTP attempts, retries included.")
	m.DecodeAttempts = b.counter("narwhal_decode_attempts_total", "Decode HTTP attempts, retries included.")
	m.RetryAttempts = b.counter("narwhal_retry_attempts_total", "Extra prefill attempts after a failure.")
	m.ServedAfterRetry = b.counter("narwhal_served_after_retry_total", "Requests completed by a later attempt.")
	m.RetryCredits = b.gauge("narwhal_retry_credits", "Available shared retry credits (max serving.retry_budget).")
	m.RetryCredits.Set(float64(max(cfg.Serving.RetryBudget, 0)))
	m.RetryCreditsSpent = b.counter("narwhal_retry_credits_spent_total", "Retry credits consumed.")
	m.RetryDenied = b.counter("narwhal_retry_denied_total", "Retries denied because the shared budget was empty.")
	m.DecodeTokensObserved = b.counter("narwhal_decode_tokens_observed_total", "Decode tokens observed across all attempts.")
	m.attemptFailures = b.counterVec("narwhal_attempt_failures_total", "Failed attempts, by phase and reason.", "phase", "reason")
	for _, ph := range []string{string(fault.Prefill), string(fault.Decode)} {
		for _, r := range journal.FailedReasons() {
			m.attemptFailures.WithLabelValues(ph, r)
		}
	}
	m.upstream = b.counterVec("narwhal_upstream_seconds_total", "Summed HTTP leg time per phase, failed legs included (not GPU time).", "phase")
	seed(m.upstream, string(fault.Prefill), string(fault.Decode))
}

func (m *Metrics) buildQueueing(b builder, cfg *fleet.Config) {
	s := cfg.Serving
	m.Queued = b.gauge("narwhal_queued", "Requests waiting for an admission seat.")
	m.QueueCapacity = b.gauge("narwhal_queue_capacity", "serving.queue_capacity: admission queue bound (0 = no queue).")
	m.QueueCapacity.Set(float64(max(s.QueueCapacity, 0)))
	m.QueueHighWater = b.gauge("narwhal_queue_high_water", "Most requests ever waiting for an admission seat.")
	m.WaitingPrefill = b.gauge("narwhal_waiting_prefill", "Admitted requests waiting for a prefill seat.")
	m.WaitingDecode = b.gauge("narwhal_waiting_decode", "Prefilled requests waiting for a decode seat.")
	m.DeadlineQueueDepth = b.gauge("narwhal_deadline_queue_depth", "Requests waiting in the deadline queue while their TTFT target can still be met.")
	m.DeadlineQueueKVTokens = b.gauge("narwhal_deadline_queue_kv_tokens", "Peak KV tokens (prompt + output cap) of the requests in the deadline queue.")
	m.DeadlineQueueLimit = b.gauge("narwhal_deadline_queue_limit", "serving.deadline_queue: most requests the deadline queue holds (0 = off).")
	m.DeadlineQueueLimit.Set(float64(s.DeadlineQueue))
	m.DeadlineQueueDrain = b.gauge("narwhal_deadline_queue_drain_seconds", "The core's projection of when the deadline queue drains; the Retry-After of its refusals.")
	m.AdmissionInflight = b.gauge("narwhal_admission_inflight", "Admission seats held.")
	m.AdmissionInflightLimit = b.gauge("narwhal_admission_inflight_limit", "Admission seat limit (serving.max_connections).")
	m.AdmissionInflightLimit.Set(float64(s.MaxConnections))
	m.HTTPRetained = b.gauge("narwhal_http_retained", "Completion requests the router holds (seated or queued).")
	m.HTTPRetainedLimit = b.gauge("narwhal_http_retained_limit", "Retained-request ceiling: max_connections + queue_capacity.")
	m.HTTPRetainedLimit.Set(float64(s.MaxConnections + max(s.QueueCapacity, 0)))
	m.HTTPRetainedHighWater = b.gauge("narwhal_http_retained_high_water", "Most completion requests ever retained at once.")
	m.LoopLag = b.gauge("narwhal_router_loop_lag_seconds", "Lateness of the router's 0.05 s loop-lag probe.")
	m.SizingDelay = b.gauge("narwhal_request_sizing_delay_seconds", "Median request-sizing delay over 2 s (0 below 8 samples).")
	m.SaturationThreshold = b.gauge("narwhal_saturation_threshold_seconds", "Saturation threshold: 0.25 × slo.ttft_s.")
	m.SaturationThreshold.Set(cfg.SLO.SaturationThreshold())
}

func (m *Metrics) buildControl(b builder, cfg *fleet.Config) {
	m.MonitoringDegraded = b.gauge("narwhal_monitoring_degraded", "1 while repeated monitoring failures fence admission.")
	m.MonitoringCoreConsecutive = b.gauge("narwhal_monitoring_core_consecutive_failures", "Consecutive failed monitoring passes.")
	m.MonitoringCoreFailures = b.counter("narwhal_monitoring_core_failures_total", "Failed monitoring passes.")
	m.LegReportsInline = b.counter("narwhal_leg_reports_inline_total", "Failed legs applied on their request goroutine because the supervisor's queue was full.")
	m.PrefillBelowFloor = b.gauge("narwhal_prefill_below_floor", "1 while live prefill engines < controller.min_prefill.")
	m.DecodeBelowFloor = b.gauge("narwhal_decode_below_floor", "1 while live decode engines < controller.min_decode.")
	m.DecodeFloor = b.gauge("narwhal_decode_floor", "Configured controller.min_decode.")
	m.DecodeFloor.Set(float64(cfg.Controller.MinDecode))
	m.ControllerAdvisory = b.gauge("narwhal_controller_advisory", "1 when controller decisions are recorded without acting.")
	if cfg.Controller.Advisory {
		m.ControllerAdvisory.Set(1)
	}
	m.FlipReversals = b.counter("narwhal_flip_reversals_total", "Role flips whose target differs from the engine's previous flip.")
	m.FlipsRefused = b.counter("narwhal_flips_refused_total", "Role flips refused by a guard (timing, pins, floors, residents, advisory).")
	m.flips = b.counterVec("narwhal_flips_total", "Applied role flips, by decider and target role.", "by", "to")
	for _, p := range [][2]string{{"reactive", "prefill"}, {"reactive", "decode"}, {"decode_floor", "decode"}, {"floor_recovery", "prefill"}} {
		m.flips.WithLabelValues(p[0], p[1])
	}
	m.decisions = b.counterVec("narwhal_controller_decisions_total", "Controller evaluations, by decider and result.", "by", "result")
	for _, by := range []string{"reactive", "decode_floor", "floor_recovery"} {
		for _, r := range []string{"applied", "held", "blocked", "advisory"} {
			m.decisions.WithLabelValues(by, r)
		}
	}
	m.flipInflight = b.counterVec("narwhal_flip_inflight_total", "Requests resident on an engine when it flipped, by phase.", "phase")
	seed(m.flipInflight, string(fault.Prefill), string(fault.Decode))
}

func (m *Metrics) buildLatency(b builder, cfg *fleet.Config) {
	sc := ScalesOf(cfg)
	m.ttft = b.histogram("narwhal_ttft_seconds", "Router arrival to prefill completion, seconds.", sc.TTFT).WithLabelValues()
	m.tpot = b.histogram("narwhal_tpot_seconds", "Mean seconds per output token after prefill completion.", sc.TPOT).WithLabelValues()
	m.seat = b.histogram("narwhal_seat_seconds", "Admission seat hold time, seconds.", sc.Seat).WithLabelValues()
	m.queueWait = b.histogram("narwhal_queue_wait_seconds", "Wait per original request at each stage reached, seconds.", sc.QueueWait, "stage")
	for _, st := range []fault.Phase{fault.Admission, fault.Prefill, fault.Decode} {
		m.queueWait.WithLabelValues(string(st))
	}
}
