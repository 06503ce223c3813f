package router

import (
	"sync/atomic"
	"time"

	"github.com/narwhal-go/narwhal/internal/evidence/store"
	"github.com/narwhal-go/narwhal/internal/evidence/tierd"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// EvidenceOptions turn on the router's evidence pass: on every Interval
// it writes serving records from its journal's last Window into Store and
// publishes each engine endpoint's tier in /narwhal/state.evidence and
// narwhal_endpoint_tier. Store "" disables it.
type EvidenceOptions struct {
	Store    string
	Interval time.Duration // default 1 minute
	Window   time.Duration // default 10 minutes
}

// evidenceTiers holds the last pass's state for /narwhal/state.
type evidenceTiers struct {
	o     EvidenceOptions
	state atomic.Pointer[routerdoc.EvidenceState]
}

// startEvidence runs the evidence pass in the background when enabled.
func (r *Router) startEvidence() {
	o := r.evidence.o
	if o.Store == "" {
		return
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Minute
	}
	path := ""
	if r.journal != nil {
		path = r.journal.Path()
	}
	loop := &tierd.Loop{Store: store.Open(o.Store), Fleet: r.cfg, JournalPath: path, Interval: o.Interval, Window: o.Window,
		Clock: r.clock, Log: r.log, Publish: r.publishTiers}
	r.background(loop.Run)
}

// publishTiers stores a pass's tiers and sets the gauge.
func (r *Router) publishTiers(rep tierd.Report, err error) {
	st := &routerdoc.EvidenceState{Enabled: true, Endpoints: map[string]routerdoc.EndpointTier{}, UpdatedAt: r.clock.Now().UTC().Format(time.RFC3339)}
	if err != nil {
		st.Error = err.Error()
		r.log.Warn("evidence pass failed; tiers unchanged", "err", err)
		if prev := r.evidence.state.Load(); prev != nil {
			st.Endpoints, st.Request = prev.Endpoints, prev.Request
		}
		r.evidence.state.Store(st)
		return
	}
	st.Request = rep.Request
	for _, e := range rep.Endpoints {
		missing := make([]string, 0, len(e.Missing))
		for _, m := range e.Missing {
			missing = append(missing, string(m))
		}
		st.Endpoints[e.Engine] = routerdoc.EndpointTier{Endpoint: e.Endpoint, Tier: string(e.Tier), Missing: missing}
		r.metrics.SetEndpointTier(e.Engine, string(e.Tier))
	}
	r.evidence.state.Store(st)
}

// evidenceState is /narwhal/state.evidence.
func (r *Router) evidenceState() routerdoc.EvidenceState {
	if st := r.evidence.state.Load(); st != nil {
		return *st
	}
	return routerdoc.EvidenceState{Enabled: r.evidence.o.Store != "", Endpoints: map[string]routerdoc.EndpointTier{}}
}
