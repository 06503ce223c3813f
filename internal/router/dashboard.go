package router

import (
	"net/http"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/ui"
)

// dashboardRoutes serve the live dashboard (internal/ui) and send GET /
// to it. The page and its feed only read; lifecycle actions keep their
// admin-guarded routes.
func (r *Router) dashboardRoutes() []route {
	r.ui = ui.New(dashboardSource{r}, ui.Options{})
	h := r.ui.Handler()
	return []route{
		{"GET /{$}", http.HandlerFunc(ui.Redirect)},
		{"GET " + ui.Path, h},
		{"GET " + ui.Path + "/", h},
	}
}

// dashboardSource is the router as the dashboard reads it.
type dashboardSource struct{ r *Router }

// Snapshot reads the state document, the latency histograms, the
// journal's latest failures and each engine's lifecycle state and process
// generation.
func (s dashboardSource) Snapshot() ui.Snapshot {
	r := s.r
	snap := ui.Snapshot{State: r.state(), Lifecycle: map[string]string{}, Generation: r.life.ProcessStarts(), Tier: map[string]string{}}
	for iid, t := range snap.State.Evidence.Endpoints {
		snap.Tier[iid] = t.Tier // the evidence pass's tiers (tierd.Runner), when it runs
	}
	snap.TTFT, snap.TPOT = r.metrics.Latency()
	for _, rec := range r.life.Records() {
		snap.Lifecycle[rec.IID] = string(rec.State)
	}
	if r.journal != nil {
		snap.Failures = r.journal.RecentFailures()
	} else {
		snap.Failures = []*journal.RequestRow{}
	}
	r.locked(func() { snap.Now = r.now() })
	return snap
}
