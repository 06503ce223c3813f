package router

import (
	"encoding/json"
	"net/http"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
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

func (r *Router) state() routerdoc.StateDoc {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	snap := r.core.Snapshot(now)
	st := r.stats
	c := r.cfg
	t := c.Controller.Thresholds
	ctl := r.core.Control()
	resident := map[string]routerdoc.PhasePair[int]{}
	var pinned []string
	for _, e := range snap.Engines {
		resident[e.IID] = routerdoc.PhasePair[int]{Prefill: e.ResidentPrefill, Decode: e.ResidentDecode}
		if e.Pin {
			pinned = append(pinned, e.IID)
		}
	}
	journalRun := ""
	if r.journal != nil {
		journalRun = r.journal.Run()
	}
	return routerdoc.StateDoc{
		Schema: routerdoc.StateSchema, SchemaVersion: routerdoc.StateSchemaVersion,
		JournalRun: journalRun, Controller: "reactive", TokenAccounting: "token_ids", Residency: r.residencyState(),
		Served: st.served, SLOMet: st.sloMet, Failed: st.failed, Offered: st.offered,
		UnsizedOffered: st.unsizedOffered, Expired: st.expired, Cancelled: st.cancelled,
		InvalidRequests: st.invalid, Unserved: snap.Unserved,
		OutcomeReasons: outcomeReasons(st.reasons),
		Admission: routerdoc.AdmissionState{
			Inflight: len(r.seats), QueueCapacity: c.Serving.QueueCapacity, Limit: r.limit,
			Rejected: st.rejected, Refused: st.refused, EngineAuth: c.Engine.AuthMode(),
			Mode: c.Serving.Admission, Margin: c.Serving.AdmissionMargin,
		},
		Serving:            r.servingStateLocked(),
		FirstTokenTimeoutS: c.Engine.FirstTokenTimeoutS,
		Pools:              routerdoc.PhasePair[[]string]{Prefill: snap.Pool(fleet.Prefill), Decode: snap.Pool(fleet.Decode)},
		Load:               routerdoc.PhasePair[float64]{Prefill: snap.Load.Prefill, Decode: snap.Load.Decode},
		Engines:            snap.Engines,
		Thresholds: routerdoc.ThresholdState{Expand: t.Expand, Shrink: t.Shrink, CooldownS: t.CooldownS,
			SustainedIntervals: t.SustainedIntervals, DwellS: t.DwellS, PanicRatio: t.PanicRatio},
		SLO:        routerdoc.SLOState{TTFTS: c.SLO.TTFT, TPOTS: c.SLO.TPOT},
		Resident:   resident,
		Pinned:     nonNil(pinned),
		MinPrefill: c.Controller.MinPrefill, MinDecode: c.Controller.MinDecode,
		Ejected: r.ejectedIIDs(), Draining: r.drainingIIDs(), Probation: r.av.Probation(),
		Health: r.av.HealthState(now), Quarantined: nonNil(r.life.Quarantined()), Held: r.life.Holds(),
		Control: routerdoc.ControlSummary{Advisory: ctl.Advisory, LastDecision: ctl.LastDecision,
			Decisions: ctl.Decisions, Flips: ctl.Flips, FlipReversals: ctl.FlipReversals,
			FlipsRefused: ctl.FlipsRefused},
		PanicBypasses: ctl.PanicBypasses,
		Monitoring:    r.av.MonitoringState(r.lagSeconds()),
		Flips:         ctl.History, FlipsRefused: ctl.FlipsRefused,
	}
}

// servingStateLocked is /narwhal/state.serving; r.mu is held.
func (r *Router) servingStateLocked() routerdoc.ServingState {
	st := r.stats
	failures := []routerdoc.AttemptFailure{}
	for k, n := range st.attemptFailures {
		failures = append(failures, routerdoc.AttemptFailure{Phase: k[0], Reason: k[1], Count: n})
	}
	sort.Slice(failures, func(i, j int) bool {
		a, b := failures[i], failures[j]
		return a.Phase+a.Reason < b.Phase+b.Reason
	})
	return routerdoc.ServingState{
		HTTPRetained: r.retained.Load(), HTTPRetainedLimit: r.limit + r.cfg.Serving.QueueCapacity,
		HTTPRetainedHighWater: st.retainedHighWater, BodyReads: r.reads.total(),
		MaxModelLen:     r.maxModelLen(),
		PrefillAttempts: st.prefillAttempts, DecodeAttempts: st.decodeAttempts,
		RetryAttempts: st.retries, RetryCredits: st.credits, RetryCreditsSpent: st.creditsSpent,
		RetryDenied: st.retryDenied, ServedAfterRetry: st.servedAfterRetry,
		AttemptFailures: failures, DecodeTokensObserved: st.decodeTokens,
		UpstreamSeconds: routerdoc.PhasePair[float64]{Prefill: st.upstreamPrefill, Decode: st.upstreamDecode},
	}
}

// ejectedIIDs are the ejected engines, sorted.
func (r *Router) ejectedIIDs() []string {
	ejected := []string{}
	for iid := range r.life.Ejected() {
		ejected = append(ejected, iid)
	}
	sort.Strings(ejected)
	return ejected
}

// drainingIIDs are the engines not active, in the records' order.
func (r *Router) drainingIIDs() []string {
	draining := []string{}
	for _, rec := range r.life.Records() {
		if rec.State != lifecycle.Active {
			draining = append(draining, rec.IID)
		}
	}
	return draining
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
