package avail

import (
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
)

// Mid-stream cuts: a decode stream that produced tokens and then ended
// without [DONE]. The request cannot be retried (output may have reached
// the client), so the engine must leave placement quickly: every cut rests
// it, and recovery.eject_after consecutive cuts eject it. The breaker's
// usual verification cannot clear a cut: a short probe passes on an
// engine that cuts long streams.

// cutQuarantineS is the rest after a cut while recovery.failure_quarantine_s
// is 0 (off): a cutting engine breaks every stream placed on it, so "off"
// would let it break all of them (the reference has no value for this;
// its complete example rests failed engines 5 s).
const cutQuarantineS = 5.0

// streamCut records a cut on iid: the breaker's output_cut class, an
// ejection at its threshold when another engine covers the role, and a
// timed rest otherwise.
func (s *Supervisor) streamCut(iid string, e *fault.Error) {
	s.log.Warn("engine cut a decode stream after output started", "iid", iid, "err", e.Msg)
	if s.failed(iid, lifecycle.OutputCut) == lifecycle.EjectCovered {
		s.eject(iid, string(lifecycle.OutputCut), true) // never the last of its role
		return
	}
	q := s.cfg.Recovery.FailureQuarantineS
	if q <= 0 {
		q = cutQuarantineS
	}
	s.quarantineFor(iid, q)
}

// quarantineFor rests iid for q seconds when another live engine covers
// its role.
func (s *Supervisor) quarantineFor(iid string, q float64) {
	if q <= 0 || s.lastOfRole(iid) {
		return
	}
	if s.lf.step(lifecycle.Quarantine{IID: iid, Until: s.now() + q}).Changed {
		s.holdLen.Store(iid, q)
		s.publishLive()
		s.journalEvent(journal.Event{Name: journal.EventEngineHoldStarted, At: s.now(),
			Fields: map[string]any{"iid": iid, "kind": "timed", "duration_s": q}})
	}
}

// heldFor is the length of iid's last timed hold.
func (s *Supervisor) heldFor(iid string) float64 {
	if q, ok := s.holdLen.Load(iid); ok {
		return q.(float64)
	}
	return s.cfg.Recovery.FailureQuarantineS
}
