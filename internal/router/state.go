package router

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// serveState is the narwhal.state v1 document: what the scheduler holds
// and what the router counted.
func (r *Router) serveState(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, r.state())
}

func (r *Router) state() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	snap := r.core.Snapshot(now)
	st := r.stats
	resident := map[string]any{}
	var pinned, ejected, draining []string
	for _, e := range snap.Engines {
		resident[e.IID] = map[string]int{"prefill": e.ResidentPrefill, "decode": e.ResidentDecode}
		if e.Pin {
			pinned = append(pinned, e.IID)
		}
	}
	for iid := range r.life.Ejected() {
		ejected = append(ejected, iid)
	}
	sort.Strings(ejected)
	for _, rec := range r.life.Records() {
		if rec.State != lifecycle.Active {
			draining = append(draining, rec.IID)
		}
	}
	failures := []map[string]any{}
	for k, n := range st.attemptFailures {
		failures = append(failures, map[string]any{"phase": k[0], "reason": k[1], "count": n})
	}
	sort.Slice(failures, func(i, j int) bool {
		a, b := failures[i], failures[j]
		return a["phase"].(string)+a["reason"].(string) < b["phase"].(string)+b["reason"].(string)
	})
	journalRun := ""
	if r.journal != nil {
		journalRun = r.journal.Run()
	}
	c := r.cfg
	t := c.Controller.Thresholds
	ctl := r.core.Control()
	return map[string]any{
		"schema": "narwhal.state", "schema_version": 1,
		"journal_run": journalRun, "controller": "reactive", "token_accounting": "token_ids",
		"served": st.served, "slo_met": st.sloMet, "failed": st.failed, "offered": st.offered,
		"unsized_offered": st.unsizedOffered, "expired": st.expired, "cancelled": st.cancelled,
		"invalid_requests": st.invalid, "unserved": snap.Unserved,
		"outcome_reasons": outcomeReasons(st.reasons),
		"admission": map[string]any{
			"inflight": len(r.seats), "queue_capacity": c.Serving.QueueCapacity, "limit": r.limit,
			"rejected": st.rejected, "refused": st.refused, "engine_auth": c.Engine.AuthMode(),
			"mode": c.Serving.Admission, "margin": c.Serving.AdmissionMargin,
		},
		"serving": map[string]any{
			"http_retained": r.retained.Load(), "http_retained_limit": r.limit + c.Serving.QueueCapacity,
			"http_retained_high_water": st.retainedHighWater, "body_reads": r.reads.total(),
			"max_model_len":    r.maxModelLen(),
			"prefill_attempts": st.prefillAttempts, "decode_attempts": st.decodeAttempts,
			"retry_attempts": st.retries, "retry_credits": st.credits, "retry_credits_spent": st.creditsSpent,
			"retry_denied": st.retryDenied, "served_after_retry": st.servedAfterRetry,
			"attempt_failures": failures, "decode_tokens_observed": st.decodeTokens,
			"upstream_seconds": map[string]float64{"prefill": st.upstreamPrefill, "decode": st.upstreamDecode},
		},
		"first_token_timeout_s": c.Engine.FirstTokenTimeoutS,
		"pools":                 map[string][]string{"prefill": snap.Pool(fleet.Prefill), "decode": snap.Pool(fleet.Decode)},
		"load":                  map[string]float64{"prefill": snap.Load.Prefill, "decode": snap.Load.Decode},
		"engines":               snap.Engines,
		"thresholds": map[string]any{"expand": t.Expand, "shrink": t.Shrink, "cooldown_s": t.CooldownS,
			"sustained_intervals": t.SustainedIntervals, "dwell_s": t.DwellS, "panic_ratio": t.PanicRatio},
		"slo":         map[string]float64{"ttft_s": c.SLO.TTFT, "tpot_s": c.SLO.TPOT},
		"resident":    resident,
		"pinned":      nonNil(pinned),
		"min_prefill": c.Controller.MinPrefill, "min_decode": c.Controller.MinDecode,
		"ejected": nonNil(ejected), "draining": nonNil(draining), "probation": r.drift.Probation(), "health": r.healthState(now), "quarantined": nonNil(r.life.Quarantined()),
		"held": r.life.Holds(),
		"control": map[string]any{"advisory": ctl.Advisory, "last_decision": ctl.LastDecision,
			"decisions": ctl.Decisions, "flips": ctl.Flips, "flip_reversals": ctl.FlipReversals,
			"flips_refused": ctl.FlipsRefused},
		"panic_bypasses": ctl.PanicBypasses,
		"monitoring":     r.monitoringState(),
		"flips":          ctl.History, "flips_refused": ctl.FlipsRefused,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func outcomeReasons(m map[string]map[string]int) map[string]map[string]int {
	out := map[string]map[string]int{"failed": {}, "refused": {}, "rejected": {}, "expired": {}}
	for terminal, reasons := range m {
		if _, ok := out[terminal]; !ok {
			continue
		}
		for k, n := range reasons {
			out[terminal][k] = n
		}
	}
	return out
}
