package router

import (
	"context"
	"net/http"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/openai"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/takeover"
)

// HA configures durable state and the fenced lease (takeover.Options).
type HA = takeover.Options

// newHA builds the router's high-availability side (internal/takeover).
func (r *Router) newHA(o HA) (*takeover.HA, error) {
	return takeover.New(takeover.Config{StatePath: o.StatePath, Lease: o.Lease, StandbyOf: o.StandbyOf,
		Fleet: r.cfg, Engines: r.order, Clock: r.clock, Log: r.log, Journal: r.journal, Metrics: r.metrics,
		Life: r.av.Handoff()}, haSide{r})
}

// haSide is the router as internal/takeover sees it.
type haSide struct{ r *Router }

func (s haSide) Now() float64                           { return s.r.now() }
func (s haSide) SLOMet(row *journal.RequestRow) bool    { return s.r.sloMet(row) }
func (s haSide) Background(f func(ctx context.Context)) { s.r.background(f) }
func (s haSide) Identify(ctx context.Context)           { s.r.av.CaptureIdentities(ctx) }

// Snapshot reads the roles and counters the handoff records at one
// instant under r.mu, so its run_at matches them exactly.
func (s haSide) Snapshot() takeover.Snapshot {
	r := s.r
	var out takeover.Snapshot
	var snap *sched.Snapshot
	r.locked(func() {
		out.At = r.now()
		snap = r.core.Snapshot(out.At)
		out.Counters, out.Reasons = r.stats.Handoff(snap.Unserved), routerdoc.OutcomeReasons(r.stats.Reasons)
	})
	for _, e := range snap.Engines {
		out.Roles = append(out.Roles, takeover.EngineRole{IID: e.IID, Role: e.Role})
	}
	return out
}

// Apply restores roles and counters, then re-syncs liveness with the
// lifecycle takeover restored.
func (s haSide) Apply(x takeover.Restored) {
	r := s.r
	r.locked(func() { s.applyLocked(x) })
	if x.Hold != "" {
		r.av.HoldWave(x.Hold)
	}
}

func (s haSide) applyLocked(x takeover.Restored) {
	r := s.r
	for iid, role := range x.Roles {
		r.core.SetRole(iid, role)
	}
	r.stats.Restore(x.Counters, x.Reasons)
}

// AddLate adds the old run's late outcomes to the counters.
func (s haSide) AddLate(l takeover.Late) {
	s.r.locked(func() { l.AddTo(&s.r.stats) })
}

// recordAdmission writes the call's admission record (crash accounting,
// internal/takeover).
func (c *call) recordAdmission() {
	c.r.ha.Admitted(journal.Admission{RID: c.rid, ClientRID: c.ex.clientRID, Arrived: c.adm.arrived, Endpoint: c.ex.req.URL.Path})
}

// healthStatus is /health's status word.
func (r *Router) healthStatus() string {
	switch {
	case r.ready():
		return "ok"
	case r.ha.Fenced():
		return "fenced"
	case r.ha.Standby():
		return "standby"
	case r.av.WaveBlocked() != "":
		return "maintenance"
	}
	return "degraded"
}

// serveHealth is process liveness: always 200, with the router's status.
func (r *Router) serveHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, routerdoc.Health{Status: r.healthStatus(), Instances: len(r.order), AvailableInstances: r.av.LiveCount()})
}

// serveReady is load-balancer readiness: 200 only when this router
// controls the fleet, knows its engines and has one live.
func (r *Router) serveReady(w http.ResponseWriter, _ *http.Request) {
	reason, ready := r.readiness()
	if r.closing.Load() {
		reason, ready = "shutting down", false
	}
	epoch, holder := r.ha.LeaseIdentity()
	body := routerdoc.Ready{Status: "ready", ControlReady: r.ha.Controls(), Epoch: epoch, Holder: holder, Reason: reason,
		Held: routerdoc.Holds(r.life.Holds()), Standby: standbyDoc(r.ha.Following())}
	if !ready {
		body.Status = "not_ready"
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 503, body)
		return
	}
	writeJSON(w, 200, body)
}

// standbyDoc is /ready's standby section, nil on a router not following.
func standbyDoc(st *state.FollowerStatus) *routerdoc.Standby {
	if st == nil {
		return nil
	}
	return &routerdoc.Standby{Primary: st.Primary, GoodProbes: st.GoodProbes, Misses: st.Misses, LastMiss: st.LastMiss,
		HandoffAt: st.HandoffAt}
}

func (r *Router) serveHandoff(w http.ResponseWriter, _ *http.Request) {
	b, err := state.Encode(r.ha.Handoff())
	if err != nil {
		openai.ServerError(http.StatusInternalServerError, "handoff", "handoff document: "+err.Error()).Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
