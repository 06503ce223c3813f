package avail

import (
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/routerdoc"
)

// The drift pass (runtime.md §3.3): each monitor pass feeds every live
// engine's decode residual — observed token interval over the profile's
// — to the drift tracker, and applies its verdicts: probation puts the
// placement penalty on, eviction ejects with cause drift when another
// live engine covers the role.

// DriftPass scores the monitor interval that is closing; the router
// calls it before the core's Tick.
func (s *Supervisor) DriftPass() {
	now := s.now()
	paces := s.core.DecodePace(now)
	ejected := s.lf.Ejected()
	samples := make([]lifecycle.Sample, 0, len(paces))
	for _, p := range paces {
		if _, out := ejected[p.IID]; out {
			if s.drift.Reset(p.IID) { // it starts afresh when readmitted
				s.setProbation(p.IID, false, "ejected")
			}
			continue
		}
		if !p.Live {
			continue // held out for now (quarantine, drain): nothing to score
		}
		res, ok := p.Residual()
		samples = append(samples, lifecycle.Sample{IID: p.IID, Residual: res, OK: ok, Paused: p.PrefillPaused})
	}
	for _, v := range s.drift.Observe(now, samples) {
		s.driftVerdict(v)
	}
	s.publishDrift()
	for iid, st := range s.drift.States() {
		s.metrics.SetDrift(iid, st.Probation, st.PrefillPaused, st.Scored, st.Undersampled, st.PrefillPauses)
	}
}

// driftView is the drift tracker as its readers see it: a snapshot the
// monitor goroutine, the tracker's one owner, publishes after each pass.
type driftView struct {
	states    map[string]lifecycle.DriftState
	probation []string
}

func (s *Supervisor) publishDrift() {
	s.driftSeen.Store(&driftView{states: s.drift.States(), probation: s.drift.Probation()})
}

// DriftStates is the drift tracker per engine, as of the last pass.
func (s *Supervisor) DriftStates() map[string]lifecycle.DriftState { return s.driftSeen.Load().states }

// Probation lists the engines on drift probation, as of the last pass.
func (s *Supervisor) Probation() []string { return s.driftSeen.Load().probation }

// driftVerdict applies one verdict of a closed window.
func (s *Supervisor) driftVerdict(v lifecycle.DriftVerdict) {
	args := []any{"iid", v.IID, "score", v.Score, "band", v.Band, "windows", v.Windows}
	switch v.Action {
	case lifecycle.ProbationStarted:
		s.log.Warn("engine on drift probation: it decodes slower than its profile", args...)
		s.setProbation(v.IID, true, "")
	case lifecycle.ProbationEnded:
		s.log.Info("engine off drift probation: it keeps pace again", args...)
		s.setProbation(v.IID, false, "")
	case lifecycle.Evict:
		if s.lastOfRole(v.IID) {
			s.log.Warn("keeping a drifting engine on probation: it is the last live engine of its role", args...)
			return
		}
		s.log.Warn("evicting a drifting engine", args...)
		s.eject(v.IID, "drift", true)
		if s.drift.Reset(v.IID) {
			s.setProbation(v.IID, false, "ejected")
		}
	}
}

// setProbation tells the core whether iid's prices carry the penalty.
func (s *Supervisor) setProbation(iid string, on bool, why string) {
	s.core.SetProbation(iid, on)
	if why != "" {
		s.log.Info("engine off drift probation", "iid", iid, "reason", why)
	}
}

// HealthState is /narwhal/state.health: the drift tracker per engine.
func (s *Supervisor) HealthState(now float64) map[string]routerdoc.HealthState {
	out := map[string]routerdoc.HealthState{}
	for iid, st := range s.DriftStates() {
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
