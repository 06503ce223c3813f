package avail

import (
	"context"
	"sync/atomic"
)

// The monitor pass never waits for an engine. Its probes — readmission
// (with a contracted fleet's gates, 22.5 s at the defaults), hold
// re-examination and the liveness sweep — start here as jobs on their own
// goroutines and report through the lifecycle manager when they end, so
// role control, placement and the handoff write keep their interval
// whatever one engine takes to answer.
//
// Jobs are bounded twice: one job per engine at a time (a job still
// running when its engine is due again makes the pass skip it, and the
// engine is due again at the next cadence), and at most maxProbeJobs
// probing at once. Every probe inside a job carries its own timeout
// (engine.health_timeout_s for the health checks, the gates' bound for a
// validation: probe.FleetTimeouts' Control and FirstToken).

// maxProbeJobs bounds the probe jobs running at once; a job waits for a
// slot (or for the router to close).
const maxProbeJobs = 8

// probeJobs is the one-job-per-engine guard, the slots, and how many
// jobs ended per engine.
type probeJobs struct {
	busy  map[string]*atomic.Bool  // iid → a job runs; keys fixed at New
	done  map[string]*atomic.Int64 // iid → jobs ended; keys fixed at New
	slots chan struct{}
}

func newProbeJobs(iids []string) probeJobs {
	j := probeJobs{busy: make(map[string]*atomic.Bool, len(iids)), done: make(map[string]*atomic.Int64, len(iids)),
		slots: make(chan struct{}, maxProbeJobs)}
	for _, iid := range iids {
		j.busy[iid], j.done[iid] = &atomic.Bool{}, &atomic.Int64{}
	}
	return j
}

// startJob runs job for iid on a background goroutine unless one runs for
// iid already; it reports whether it started one. It never blocks.
func (s *Supervisor) startJob(iid string, job func(ctx context.Context, iid string)) bool {
	busy, done := s.jobs.busy[iid], s.jobs.done[iid]
	if busy == nil || !busy.CompareAndSwap(false, true) {
		return false
	}
	s.goBg(func(ctx context.Context) {
		defer busy.Store(false)
		defer done.Add(1) // before busy clears: a job counted is one ended
		select {
		case s.jobs.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-s.jobs.slots }()
		job(ctx, iid)
	})
	return true
}

// startJobs starts job for each of iids (see startJob).
func (s *Supervisor) startJobs(iids []string, job func(ctx context.Context, iid string)) {
	for _, iid := range iids {
		s.startJob(iid, job)
	}
}

// Probing reports whether a probe job runs for iid.
func (s *Supervisor) Probing(iid string) bool {
	b := s.jobs.busy[iid]
	return b != nil && b.Load()
}

// ProbesDone is how many probe jobs (readmission, hold, liveness) have
// ended for iid: what a test waits on to know probes ran, rather than
// on time.
func (s *Supervisor) ProbesDone(iid string) int64 {
	if d := s.jobs.done[iid]; d != nil {
		return d.Load()
	}
	return 0
}
