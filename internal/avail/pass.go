package avail

import "github.com/narwhal-go/narwhal/internal/lifecycle"

// MonitorPass is the supervisor's share of one monitor pass, after the
// core's Tick (runtime.md §3.4 stage order): drains settle, timed holds
// end, readmission and hold probes, the liveness sweep when due, then the
// lifecycle journal and gauges. It runs on the monitor goroutine only,
// and never waits for an engine: the probes start as jobs (rounds.go)
// whose outcomes land when they end, so a slow engine delays neither this
// pass nor role control nor the handoff write around it.
func (s *Supervisor) MonitorPass() {
	// Residents are read first: the tick holds avail's lock, which must
	// never be taken while the core's mutex is held.
	resident := map[string]int{}
	for _, e := range s.core.Snapshot().Engines {
		resident[e.IID] = e.ResidentPrefill + e.ResidentDecode
	}
	rd := s.step(s.now(), lifecycle.Tick{Wall: s.wallNow(), Resident: resident})
	s.released(rd.Released)
	s.startJobs(rd.Probe, s.readmissionProbe)
	s.holdProbes()
	s.passes++
	if every := s.cfg.Recovery.LivenessEvery; every > 0 && s.passes%every == 0 {
		s.livenessSweep()
	}
	for iid, st := range rd.States {
		s.metrics.SetLifecycleState(iid, string(st))
	}
	for iid, streaks := range rd.Streaks {
		for class, n := range streaks {
			s.metrics.SetStreak(iid, string(class), n)
		}
	}
}

// LivenessSweeps reports whether the monitor pass probes live engines
// (recovery.liveness_every > 0); without sweeps the router refreshes what
// their credential probes would have told it by other means.
func (s *Supervisor) LivenessSweeps() bool { return s.cfg.Recovery.LivenessEvery > 0 }

// RestoreEvents puts a handoff document's lifecycle events back; they are
// already in the old run's journal, so they are not journalled again.
func (s *Supervisor) RestoreEvents(evs []lifecycle.Event) {
	s.lf.step(lifecycle.RestoreEvents{Events: evs}) // never handed out by Ready: not journalled again
}

// Restore applies a handoff document's lifecycle records, ejections and
// accepted process starts, and publishes the liveness they imply.
func (s *Supervisor) Restore(records []lifecycle.Record, ejected map[string]string, starts map[string]float64) {
	s.lf.step(lifecycle.Restore{Records: records, Ejected: ejected, Starts: starts})
	s.publishLive()
}

// Handoff is the lifecycle as internal/takeover records and restores it:
// read through the view, restored through the supervisor so it publishes
// the liveness the restored records imply and counts restored events as
// already journalled.
type Handoff struct {
	View
	s *Supervisor
}

// Handoff is s's lifecycle for internal/takeover.
func (s *Supervisor) Handoff() Handoff { return Handoff{View: s.View(), s: s} }

// Restore is Supervisor.Restore.
func (h Handoff) Restore(records []lifecycle.Record, ejected map[string]string, starts map[string]float64) {
	h.s.Restore(records, ejected, starts)
}

// RestoreEvents is Supervisor.RestoreEvents.
func (h Handoff) RestoreEvents(ev []lifecycle.Event) { h.s.RestoreEvents(ev) }

// Record makes fn hear every lifecycle Step and Ready from now on (nil
// stops it), under avail's lock: a test replays the log into a fresh
// manager (lifecycle.Replay). fn must not call into the supervisor.
func (s *Supervisor) Record(fn func(lifecycle.Entry)) {
	s.pub.mu.Lock()
	defer s.pub.mu.Unlock()
	s.life.Record(fn)
}
