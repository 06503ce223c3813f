package router

import (
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// The drift pass (runtime.md §3.3): each monitor pass feeds every live
// engine's decode residual — observed token interval over the profile's
// — to the drift tracker, and applies its verdicts: probation puts the
// placement penalty on, eviction ejects with cause drift when another
// live engine covers the role.

// driftPass scores the monitor interval that is closing; call it before
// the core's Tick.
func (r *Router) driftPass() {
	r.mu.Lock()
	now := r.now()
	paces := r.core.DecodePace(now)
	r.mu.Unlock()
	ejected := r.life.Ejected()
	samples := make([]lifecycle.Sample, 0, len(paces))
	for _, p := range paces {
		if _, out := ejected[p.IID]; out {
			if r.drift.Reset(p.IID) { // it starts afresh when readmitted
				r.setProbation(p.IID, false, "ejected")
			}
			continue
		}
		if !p.Live {
			continue // held out for now (quarantine, drain): nothing to score
		}
		res, ok := p.Residual()
		samples = append(samples, lifecycle.Sample{IID: p.IID, Residual: res, OK: ok, Paused: p.PrefillPaused})
	}
	for _, v := range r.drift.Observe(now, samples) {
		r.driftVerdict(v)
	}
	for iid, st := range r.drift.States() {
		r.metrics.SetDrift(iid, st.Probation, st.PrefillPaused, st.Scored, st.Undersampled, st.PrefillPauses)
	}
}

// driftVerdict applies one verdict of a closed window.
func (r *Router) driftVerdict(v lifecycle.DriftVerdict) {
	args := []any{"iid", v.IID, "score", v.Score, "band", v.Band, "windows", v.Windows}
	switch v.Action {
	case lifecycle.ProbationStarted:
		r.log.Warn("engine on drift probation: it decodes slower than its profile", args...)
		r.setProbation(v.IID, true, "")
	case lifecycle.ProbationEnded:
		r.log.Info("engine off drift probation: it keeps pace again", args...)
		r.setProbation(v.IID, false, "")
	case lifecycle.Evict:
		if r.lastOfRole(v.IID) {
			r.log.Warn("keeping a drifting engine on probation: it is the last live engine of its role", args...)
			return
		}
		r.log.Warn("evicting a drifting engine", args...)
		r.eject(v.IID, "drift", true)
		if r.drift.Reset(v.IID) {
			r.setProbation(v.IID, false, "ejected")
		}
	}
}

// setProbation tells the core whether iid's prices carry the penalty.
func (r *Router) setProbation(iid string, on bool, why string) {
	r.mu.Lock()
	r.core.SetProbation(iid, on)
	r.mu.Unlock()
	if why != "" {
		r.log.Info("engine off drift probation", "iid", iid, "reason", why)
	}
}

// healthState is /narwhal/state.health: the drift tracker per engine.
func (r *Router) healthState(now float64) map[string]routerdoc.HealthState {
	out := map[string]routerdoc.HealthState{}
	for iid, st := range r.drift.States() {
		var ago *float64
		if st.Scored > 0 {
			a := now - st.LastScoredAt
			ago = &a
		}
		out[iid] = routerdoc.HealthState{Scored: st.Scored, Undersampled: st.Undersampled, LastScoredSAgo: ago,
			PrefillPaused: st.PrefillPaused, PrefillPauses: st.PrefillPauses, Vetoed: st.Vetoed,
			Probation: st.Probation, DriftingWindows: st.Drifting, Baseline: st.Baseline, LastScore: st.LastScore}
	}
	return out
}
