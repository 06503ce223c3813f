package avail

import (
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
)

// publication is what the supervisor has made visible of the lifecycle
// state — liveness into the core, hold transitions and lifecycle events
// into the journal — under avail's one mutex. Each change is diffed and
// queued in order under mu; the queue is written to the journal with mu
// released (drainJournal), so no journal write and no probe ever runs
// under a lock (TestNoLockAroundIO holds this).
//
// mu also guards the lifecycle manager, which has no lock of its own
// (lockedLife). Lock order: mu, then the router's core mutex (SetLive);
// nothing holding the core mutex calls into the supervisor.
type publication struct {
	mu       sync.Mutex                // guards every field below and the lifecycle manager
	holds    map[string]lifecycle.Hold // the holds last published, by holdKey
	queue    []journal.Event           // journal events waiting for drainJournal, in order
	draining bool                      // a drainJournal call is writing; it empties queue before it returns
}

// journalEvent queues ev after everything queued before it and writes the
// queue out.
func (s *Supervisor) journalEvent(ev journal.Event) {
	s.pub.mu.Lock()
	s.pub.queue = append(s.pub.queue, ev)
	s.pub.mu.Unlock()
	s.drainJournal()
}

// drainJournal writes the queued events in order, without the lock. One
// caller drains at a time; an event queued meanwhile is written by that
// caller before it returns, so every queued event reaches the journal.
func (s *Supervisor) drainJournal() {
	s.pub.mu.Lock()
	if s.pub.draining {
		s.pub.mu.Unlock()
		return
	}
	s.pub.draining = true
	for len(s.pub.queue) > 0 {
		batch := s.pub.queue
		s.pub.queue = nil
		s.pub.mu.Unlock()
		for _, ev := range batch {
			s.writeJournal(ev)
		}
		s.pub.mu.Lock()
	}
	s.pub.draining = false
	s.pub.mu.Unlock()
}

// writeJournal is the supervisor's one journal write.
func (s *Supervisor) writeJournal(ev journal.Event) {
	if s.journal == nil {
		return
	}
	if err := s.journal.Event(ev); err != nil {
		s.log.Error("journal write failed; an event is lost", "event", ev.Name, "err", err)
	}
}

// step feeds one input to the lifecycle core at router time now and
// returns its Ready; the events in it are queued under the lock, in
// order, and written once it is released.
func (s *Supervisor) step(now float64, in lifecycle.Input) lifecycle.Ready {
	s.pub.mu.Lock()
	s.life.Step(now, in)
	rd := s.readyLocked()
	s.pub.mu.Unlock()
	s.drainJournal()
	return rd
}

// flushLifecycleEvents journals the engine_lifecycle events recorded
// since the last Ready (by Note, Drain, Readmit, …).
func (s *Supervisor) flushLifecycleEvents() {
	s.pub.mu.Lock()
	s.readyLocked()
	s.pub.mu.Unlock()
	s.drainJournal()
}

// readyLocked takes the core's Ready and queues its events for the
// journal. Called with pub.mu held.
func (s *Supervisor) readyLocked() lifecycle.Ready {
	rd := s.life.Ready()
	for _, ev := range rd.Events {
		s.pub.queue = append(s.pub.queue, journal.EngineLifecycle(time.UnixMicro(int64(ev.At*1e6)), ev.Action, ev.Fields))
	}
	return rd
}

// holdChange is one hold that started (ended false) or ended.
type holdChange struct {
	h     lifecycle.Hold
	ended bool
}

// diffHolds logs, exports and journals the hold transitions since the
// last call and reports whether there were any; why is what lifted the
// ones that ended.
func (s *Supervisor) diffHolds(why string) bool {
	now := s.now()
	s.pub.mu.Lock()
	changes := s.holdChangesLocked()
	for _, c := range changes {
		s.pub.queue = append(s.pub.queue, holdEvent(c, now, why))
	}
	s.pub.mu.Unlock()
	for _, c := range changes {
		if c.ended {
			s.log.Info("engine released", "iid", c.h.IID, "cause", c.h.Cause, "by", why)
		} else {
			s.log.Warn("engine held out", "iid", c.h.IID, "cause", c.h.Cause, "detail", c.h.Detail)
		}
		s.metrics.SetHeld(c.h.IID, c.h.Cause, !c.ended)
	}
	s.drainJournal()
	return len(changes) > 0
}

// holdChangesLocked diffs the lifecycle's holds against the published
// ones and publishes them. Called with pub.mu held.
func (s *Supervisor) holdChangesLocked() []holdChange {
	now := map[string]lifecycle.Hold{}
	for _, h := range s.life.Holds() {
		now[holdKey(h)] = h
	}
	var out []holdChange
	for k, h := range now {
		if _, ok := s.pub.holds[k]; !ok {
			out = append(out, holdChange{h: h})
		}
	}
	for k, h := range s.pub.holds {
		if _, ok := now[k]; !ok {
			out = append(out, holdChange{h: h, ended: true})
		}
	}
	s.pub.holds = now
	return out
}

// holdEvent is the journal event of one hold transition at now.
func holdEvent(c holdChange, now float64, why string) journal.Event {
	if c.ended {
		return journal.Event{Name: journal.EventEngineHoldEnded, At: now,
			Fields: map[string]any{"iid": c.h.IID, "kind": c.h.Cause, "cause": why, "held_s": now - c.h.Since}}
	}
	return journal.Event{Name: journal.EventEngineHoldStarted, At: now,
		Fields: map[string]any{"iid": c.h.IID, "kind": c.h.Cause, "duration_s": nil, "detail": c.h.Detail}}
}

// publishLive derives every engine's liveness from the lifecycle state
// and publishes it into the core: the one place liveness is written. The
// lock keeps the core's sets in the order they were derived.
func (s *Supervisor) publishLive() {
	s.pub.mu.Lock()
	defer s.pub.mu.Unlock()
	live := s.life.LiveSet()
	s.live.Store(&live)
	s.core.SetLive(live)
}
