package router

import (
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/sched"
)

// monitorPass is one monitor interval, in the reference's stage order:
// the drift pass (before Tick, which closes the interval it scores), role
// control, drains, rollover (inside Tick), readmission probes, the
// liveness sweep when due, telemetry, and the handoff document.
func (r *Router) monitorPass() {
	r.checkProfiles()
	r.av.DriftPass() // reads the interval Tick is about to close
	r.controlPass()
	r.av.MonitorPass()
	var failed []string
	if err := r.ha.WriteHandoff(); err != nil {
		r.av.StageFailed("handoff", "io", err)
		failed = append(failed, "handoff io")
	}
	r.av.PassEnded(failed)
}

// controlPass runs the core's Tick: role control and window rollover.
func (r *Router) controlPass() {
	var before, after sched.ControlState
	var decisions []sched.Decision
	var snap *sched.Snapshot
	var highWater int64
	r.locked(func() {
		now := r.now()
		before = r.core.Control()
		decisions = r.core.Tick(now)
		after = r.core.Control()
		r.serveQueueLocked() // a flip may have made room
		snap, highWater = r.core.Snapshot(now), r.stats.RetainedHighWater
	})
	for _, d := range decisions {
		r.recordDecision(d)
	}
	r.metrics.FlipReversals.Add(float64(after.FlipReversals - before.FlipReversals))
	r.metrics.FlipsRefused.Add(float64(after.RefusedSince(before)))
	r.publish(snap, highWater)
}

// recordDecision counts, logs and journals one controller decision.
func (r *Router) recordDecision(d sched.Decision) {
	r.metrics.Decision(d.By, d.Result)
	if d.Flip != nil {
		r.metrics.Flip(d.By, string(d.Flip.To))
		r.log.Info("role change", "iid", d.Flip.IID, "to", d.Flip.To, "by", d.By, "reason", d.Reason)
	}
	if r.journal == nil {
		return
	}
	ev := journal.ControllerDecision(d.At, journal.Decision{Prefill: d.Prefill, Decode: d.Decode, By: d.By,
		Reason: d.Reason, Result: d.Result, Applied: d.Applied, Details: d.JournalDetails()})
	if err := r.journal.Event(ev); err != nil {
		r.log.Error("journal write failed; a controller decision is lost", "err", err)
	}
}
