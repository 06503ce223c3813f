package router

import (
	"encoding/json"
	"net/http"

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

// state gathers the document's inputs (routerdoc.State builds it): the
// core and the counters at one instant under r.mu, the supervisor's view
// after it, since nothing holding r.mu calls into avail (coreSide).
func (r *Router) state() routerdoc.StateDoc {
	in := routerdoc.StateInput{Fleet: r.cfg, Limit: r.limit}
	var now float64
	r.locked(func() {
		now = r.now()
		in.Core, in.Control, in.Counts = r.core.Snapshot(now), r.core.Control(), r.stats.Clone()
	})
	if r.journal != nil {
		in.JournalRun = r.journal.Run()
	}
	in.Inflight, in.Retained, in.BodyReads, in.MaxModelLen = len(r.seats), r.retained.Load(), r.reads.Total(), r.models.Least()
	in.Ejected, in.Records, in.Probation = r.life.Ejected(), r.life.Records(), r.av.Probation()
	in.Health, in.Quarantined, in.Held = r.av.HealthState(now), r.life.Quarantined(), r.life.Holds()
	in.Monitoring = r.av.MonitoringState(r.sat.Lag().Seconds())
	in.Evidence = r.evidence.State()
	in.Profiles = r.profiles.State()
	in.Residency = r.residencyState()
	return routerdoc.State(in)
}
