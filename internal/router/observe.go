package router

import (
	"net/http"
	"sort"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// observe mirrors a settled call into the metrics; credits are the retry
// credits as its settle left them.
func (r *Router) observe(o outcome, row *journal.RequestRow, sloMet bool, credits float64) {
	m := r.metrics
	m.Offered.Inc()
	if !row.InputSized {
		m.UnsizedOffered.Inc()
	}
	switch o.terminal {
	case journal.TerminalCompleted:
		m.Served.Inc()
		if sloMet {
			m.SLOMet.Inc()
		}
		if row.Attempts > 1 {
			m.ServedAfterRetry.Inc()
		}
	case journal.TerminalFailed:
		m.Failed(string(o.reason))
	case journal.TerminalExpired:
		m.Expired(string(o.reason))
	case journal.TerminalRefused:
		m.Refused(string(o.reason))
	case journal.TerminalRejected:
		m.Rejected(string(o.reason))
	case journal.TerminalCancelled:
		m.Cancelled.Inc()
	case journal.TerminalInvalid:
		m.Invalid.Inc()
	}
	if row.TTFT != nil {
		m.ObserveTTFT(*row.TTFT)
	}
	if row.TPOT != nil {
		m.ObserveTPOT(*row.TPOT)
	}
	m.DecodeTokensObserved.Add(float64(row.DecodeTokensObserved))
	for _, f := range row.AttemptFailures {
		m.AttemptFailed(f.Phase, f.Reason)
	}
	m.Upstream(fault.Prefill, row.UpstreamSeconds.Prefill)
	m.Upstream(fault.Decode, row.UpstreamSeconds.Decode)
	m.ObserveRequest(row) // tokens, e2e, queue time by stage, KV handoff
	m.RetryCredits.Set(credits)
}

// publish mirrors a scheduling snapshot (and the retained high-water mark
// read with it) into the pool gauges.
func (r *Router) publish(s *sched.Snapshot, highWater int64) {
	p := metrics.Pools{Prefill: s.Pool(fleet.Prefill), Decode: s.Pool(fleet.Decode),
		PrefillLoad: s.Load.Prefill, DecodeLoad: s.Load.Decode, Resident: map[string]metrics.Resident{}}
	for _, e := range s.Engines {
		p.Resident[e.IID] = metrics.Resident{Prefill: e.ResidentPrefill, Decode: e.ResidentDecode}
	}
	for iid := range r.life.Ejected() { // drained or held engines are not ejected
		p.Ejected = append(p.Ejected, iid)
	}
	sort.Strings(p.Ejected)
	r.metrics.SetPools(p)
	r.metrics.HTTPRetained.Set(float64(r.retained.Load()))
	r.metrics.AdmissionInflight.Set(float64(len(r.seats)))
	r.metrics.HTTPRetainedHighWater.Set(float64(highWater))
	r.metrics.DeadlineQueueDepth.Set(float64(s.Queue.Depth))
	r.metrics.DeadlineQueueKVTokens.Set(float64(s.Queue.KVTokens))
	r.metrics.DeadlineQueueDrain.Set(s.Queue.DrainS)
}

// metricsHandler refreshes the gauges that move between monitor passes,
// then serves the registry.
func (r *Router) metricsHandler() http.Handler {
	h := r.metrics.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var snap *sched.Snapshot
		var highWater int64
		r.locked(func() { snap, highWater = r.core.Snapshot(r.now()), r.stats.RetainedHighWater })
		r.publish(snap, highWater)
		h.ServeHTTP(w, req)
	})
}
