package avail

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Under recovery.engine_restart_policy whole_wave an ejection or an
// identity failure holds the whole fleet: NIXL peers of a failed engine
// can hold stale registrations, so the operator restarts every engine and
// readmits them as one set (POST /narwhal/lifecycle/readmit
// {"wave": true}). Until then /ready is 503, /health says maintenance and
// new requests get 503 standby; work already decoding finishes.

// waveHold is the whole-wave hold's reason; nil when none is active.
type waveHold struct{ reason atomic.Pointer[string] }

// HoldWave starts the whole-wave hold, once.
func (s *Supervisor) HoldWave(reason string) { s.holdWave(reason) }

func (s *Supervisor) holdWave(reason string) {
	if s.cfg.Recovery.EngineRestartPolicy != fleet.RestartWholeWave {
		return
	}
	msg := "whole-wave restart required: " + reason
	if s.wave.reason.CompareAndSwap(nil, &msg) {
		s.log.Error("fleet held for a whole-wave restart", "reason", reason)
		s.lifecycleEvent("restart_required", map[string]any{"wave_id": "", "reason": reason})
		s.changed()
	}
}

// WaveBlocked is the whole-wave hold's reason, or "".
func (s *Supervisor) WaveBlocked() string {
	if p := s.wave.reason.Load(); p != nil {
		return *p
	}
	return ""
}

// readmitWave validates every engine (health, attestation, model,
// identity, a generation probe, a KV transfer, final health) and lifts the
// hold only if all pass.
func (s *Supervisor) readmitWave(w http.ResponseWriter) {
	if s.WaveBlocked() == "" {
		s.lifecycleReply(w, http.StatusConflict, "no whole-wave hold is active")
		return
	}
	var failed []string
	ids := map[string]vllm.Identity{}
	for _, iid := range s.order {
		checks, id := s.gates(iid, nil, false)
		ids[iid] = id
		for _, c := range checks {
			if !c.OK {
				failed = append(failed, iid+" "+c.Name+": "+c.Detail)
			}
		}
	}
	if len(failed) > 0 {
		s.lifecycleEvent("validation_failed", map[string]any{"iid": "", "error": strings.Join(failed, "; "), "wave_id": ""})
		s.lifecycleReply(w, http.StatusConflict, "readmission validation failed: "+strings.Join(failed, "; "))
		return
	}
	for iid, id := range ids {
		s.lf.step(lifecycle.AcceptIdentity{IID: iid, ID: id})
		if s.lf.step(lifecycle.Recover{IID: iid}).Changed {
			s.journalEvent(journal.EngineReadmitted(s.now(), iid, "lifecycle"))
		}
	}
	s.publishLive()
	s.wave.reason.Store(nil)
	s.lifecycleEvent("wave_readmitted", map[string]any{"engines": s.order, "wave_id": ""})
	s.log.Info("whole wave readmitted: serving again")
	s.afterLifecycle()
	s.lifecycleReply(w, http.StatusOK, "")
}
