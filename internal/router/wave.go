package router

import (
	"net/http"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
)

// Under recovery.engine_restart_policy whole_wave an ejection or an
// identity failure holds the whole fleet: NIXL peers of a failed engine
// can hold stale registrations, so the operator restarts every engine and
// readmits them as one set (POST /narwhal/lifecycle/readmit
// {"wave": true}). Until then /ready is 503, /health says maintenance and
// new requests get 503 standby; work already decoding finishes.

// holdWave starts the whole-wave hold, once.
func (r *Router) holdWave(reason string) {
	if r.cfg.Recovery.EngineRestartPolicy != fleet.RestartWholeWave {
		return
	}
	msg := "whole-wave restart required: " + reason
	if r.waveHold.CompareAndSwap(nil, &msg) {
		r.log.Error("fleet held for a whole-wave restart", "reason", reason)
		r.lifecycleEvent("restart_required", map[string]any{"wave_id": "", "reason": reason})
		r.stateChanged()
	}
}

// waveBlocked is the hold's reason, or "".
func (r *Router) waveBlocked() string {
	if p := r.waveHold.Load(); p != nil {
		return *p
	}
	return ""
}

// readmitWave validates every engine (health, attestation, model,
// identity, a generation probe, a KV transfer, final health) and lifts the
// hold only if all pass.
func (r *Router) readmitWave(w http.ResponseWriter) {
	if r.waveBlocked() == "" {
		r.lifecycleReply(w, http.StatusConflict, "no whole-wave hold is active")
		return
	}
	var failed []string
	ids := map[string]lifecycle.Identity{}
	for _, iid := range r.order {
		checks, id := r.gates(iid, nil, false)
		ids[iid] = id
		for _, c := range checks {
			if !c.OK {
				failed = append(failed, iid+" "+c.Name+": "+c.Detail)
			}
		}
	}
	if len(failed) > 0 {
		r.lifecycleEvent("validation_failed", map[string]any{"iid": "", "error": strings.Join(failed, "; "), "wave_id": ""})
		r.lifecycleReply(w, http.StatusConflict, "readmission validation failed: "+strings.Join(failed, "; "))
		return
	}
	for iid, id := range ids {
		r.life.AcceptIdentity(iid, id)
		if r.life.Recovered(iid) {
			r.journalEvent(journal.EngineReadmitted(r.now(), iid, "lifecycle"))
		}
	}
	r.syncLive()
	r.waveHold.Store(nil)
	r.lifecycleEvent("wave_readmitted", map[string]any{"engines": r.order, "wave_id": ""})
	r.log.Info("whole wave readmitted: serving again")
	r.afterLifecycle()
	r.lifecycleReply(w, http.StatusOK, "")
}
