package router

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Leg outcomes feed the breaker. Its verdicts act off the request path:
// ejections at once, verifications in the background.

// legSucceeded records a leg that did its job on iid.
func (r *Router) legSucceeded(iid, kind string) { r.life.Success(iid, kind) }

// legFailedOn records a failed leg on iid and acts on the verdict. peer
// is the decode leg's producer ("" or absent for a prefill leg).
func (r *Router) legFailedOn(iid string, e *vllm.Error, peer ...string) {
	producer := ""
	if len(peer) > 0 && peer[0] != iid {
		producer = peer[0]
	}
	hs, refused := e.HandshakeRefusal()
	switch {
	case e == errClientGone || e.Reason == vllm.ReasonLocalPool:
		return // not the engine's fault
	case e.AuthFailed():
		r.credentialRefused(iid, e) // held out, not a breaker fault: it answers, just not to us
		return
	case refused && producer != "":
		r.kvRefused(iid, producer, hs) // incompatible, not broken: retrying this pair cannot work
		return
	case e.Reason == vllm.ReasonRejected:
		r.life.Success(iid, "answered") // a 4xx: the engine is up
		return
	}
	r.quarantine(iid)
	switch r.life.Failure(iid, lifecycle.Class(e.Class)) {
	case lifecycle.Eject:
		r.eject(iid, string(lifecycle.Connection), false)
	case lifecycle.VerifyHealth:
		r.background(func(ctx context.Context) { r.verify(ctx, iid, false) })
	case lifecycle.VerifyInference:
		r.background(func(ctx context.Context) { r.verify(ctx, iid, true) })
	}
}

// quarantine rests an engine whose leg just failed for
// recovery.failure_quarantine_s, when another live engine covers its role.
func (r *Router) quarantine(iid string) { r.quarantineFor(iid, r.cfg.Recovery.FailureQuarantineS) }

// releaseQuarantines returns engines whose timed hold ended.
func (r *Router) releaseQuarantines() {
	for _, iid := range r.life.ReleaseQuarantines(r.now()) {
		r.syncLive()
		r.journalEvent(journal.Event{Name: journal.EventEngineHoldEnded, At: r.now(),
			Fields: map[string]any{"iid": iid, "kind": "timed", "cause": "expired", "held_s": r.heldFor(iid)}})
	}
}

// background runs f until it returns or the router closes.
func (r *Router) background(f func(ctx context.Context)) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		f(r.bgCtx)
	}()
}

// verify probes a suspect engine once: /health for timeout-shaped
// failures, a direct completion for bad work. Only a failed probe ejects,
// so a busy but healthy engine keeps serving.
func (r *Router) verify(ctx context.Context, iid string, inference bool) {
	if _, busy := r.verifying.LoadOrStore(iid, true); busy {
		return // one verification per engine at a time
	}
	defer r.verifying.Delete(iid)
	var e *vllm.Error
	if inference {
		e = r.inferenceProbe(ctx, iid)
	} else {
		e = r.healthProbe(ctx, iid)
	}
	if ctx.Err() != nil {
		return
	}
	if e == nil {
		r.life.Success(iid, map[bool]string{true: "inference", false: "health"}[inference])
		return
	}
	if e.AuthFailed() {
		r.credentialRefused(iid, e) // held out instead of ejected
		return
	}
	r.log.Warn("engine failed its verification probe", "iid", iid, "err", e.Msg)
	r.eject(iid, string(lifecycle.Connection), true)
}

func (r *Router) probeTimeout() time.Duration {
	return units.Seconds(r.cfg.Engine.HealthTimeoutS)
}

// healthProbe is GET /health and then the credential probe: vLLM's
// /health is unauthenticated, so a wrong engine key would look healthy
// while every request fails.
func (r *Router) healthProbe(ctx context.Context, iid string) *vllm.Error {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	if e := r.engines[iid].client.Health(ctx); e != nil {
		return e
	}
	return r.credentialProbe(ctx, iid)
}

// inferenceProbe asks the engine for two tokens directly.
func (r *Router) inferenceProbe(ctx context.Context, iid string) *vllm.Error {
	d := max(r.cfg.Engine.FirstTokenTimeoutS, r.cfg.Engine.HealthTimeoutS)
	ctx, cancel := context.WithTimeout(ctx, units.Seconds(d))
	defer cancel()
	body := mustRaw(map[string]any{"model": r.cfg.Model, "prompt": "narwhal inference probe", "max_tokens": 2})
	_, e := r.engines[iid].client.Complete(ctx, body)
	return e
}

// eject takes iid out of placement. A probe failure (protect) never removes
// the last live engine of a role; a connection ejection does, because the
// engine is gone either way.
func (r *Router) eject(iid, cause string, protect bool) {
	if protect && r.lastOfRole(iid) {
		r.log.Warn("keeping the last live engine of its role in placement despite a failed probe", "iid", iid)
		return
	}
	if !r.life.Eject(iid, cause) {
		return
	}
	r.syncLive()
	r.log.Warn("engine ejected", "iid", iid, "cause", cause)
	r.metrics.Ejection(iid, cause)
	r.journalEvent(journal.EngineEjected(r.now(), iid, cause))
	r.holdWave(iid + " ejected (" + cause + ")")
	r.stateChanged()
}

// lastOfRole reports whether no other live engine has iid's role (iid
// itself may be live or already held out).
func (r *Router) lastOfRole(iid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	snap := r.core.Snapshot(r.now())
	var role fleet.Role
	for _, e := range snap.Engines {
		if e.IID == iid {
			role = e.Role
		}
	}
	for _, e := range snap.Engines {
		if e.IID != iid && e.Live && e.Role == role {
			return false
		}
	}
	return true
}

// syncLive tells the scheduling core which engines may take placements.
func (r *Router) syncLive() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, iid := range r.order {
		r.core.SetLive(iid, r.life.Live(iid))
	}
}

func (r *Router) journalEvent(ev journal.Event) {
	if r.journal == nil {
		return
	}
	if err := r.journal.Event(ev); err != nil {
		r.log.Error("journal write failed; an event is lost", "event", ev.Name, "err", err)
	}
}

// readmissionProbes probes the ejected engines that are due: a healthy
// engine whose identity is the accepted one (or, on an uncontracted
// fleet, any healthy engine) returns to placement.
func (r *Router) readmissionProbes(ctx context.Context) {
	due := r.life.DueForProbe()
	r.forEach(ctx, due, func(ctx context.Context, iid string) {
		if r.healthProbe(ctx, iid) != nil {
			return
		}
		if r.life.Suspect(iid) && r.inferenceProbe(ctx, iid) != nil {
			return
		}
		if r.life.Ejected()[iid] == string(lifecycle.OutputCut) && r.streamProbe(ctx, iid) != nil {
			return // it still cuts streams
		}
		id, err := r.identity(ctx, iid)
		if err != nil {
			r.log.Warn("readmission probe could not read the engine identity", "iid", iid, "err", err)
			return
		}
		if r.observeIdentity(iid, id); slices.Contains(r.life.Held(), iid) {
			r.holdSupersedes(iid, id)
			return
		}
		if r.cfg.EngineContract != nil {
			// A contracted fleet revalidates the process it found: the
			// generation and a KV transfer must work before it serves.
			checks, _ := r.gates(iid, nil, false)
			if !allOK(checks) {
				r.log.Warn("readmission validation failed", "iid", iid, "checks", checks)
				return
			}
		} else if err := r.profileGenerationGate(ctx, iid, id); err != nil {
			r.log.Warn("readmission blocked by the profile generation", "iid", iid, "err", err)
			r.lifecycleEvent("profile_recovery_blocked", map[string]any{"iid": iid, "reason": err.Error()})
			return
		}
		r.life.AcceptIdentity(iid, id)
		if r.life.Recovered(iid) {
			r.syncLive()
			r.log.Info("engine readmitted", "iid", iid)
			r.journalEvent(journal.EngineReadmitted(r.now(), iid, "health"))
			r.metrics.Readmission(iid, "health")
			r.stateChanged()
		}
	})
}

// livenessSweep probes every live engine's /health and identity. Misses
// eject at recovery.liveness_misses; a changed process is excluded until
// it is validated again.
func (r *Router) livenessSweep(ctx context.Context) {
	var live []string
	for _, iid := range r.order {
		if r.life.Live(iid) {
			live = append(live, iid)
		}
	}
	r.forEach(ctx, live, func(ctx context.Context, iid string) {
		if e := r.healthProbe(ctx, iid); e != nil {
			if e.AuthFailed() {
				return // held out by the credential probe, not missing
			}
			if ctx.Err() == nil && r.life.Failure(iid, lifecycle.Liveness) == lifecycle.Eject {
				r.eject(iid, string(lifecycle.Liveness), false)
			}
			return
		}
		r.life.Success(iid, "health")
		r.checkIdentity(ctx, iid)
	})
}

// checkIdentity compares the engine's process with the accepted one.
func (r *Router) checkIdentity(ctx context.Context, iid string) {
	id, err := r.identity(ctx, iid)
	if err != nil {
		if r.cfg.EngineContract != nil && ctx.Err() == nil {
			r.excludeProcess(iid, err.Error(), 0, 0)
		}
		return
	}
	if changed, prev := r.life.CheckIdentity(iid, id); changed {
		r.excludeProcess(iid, "the engine process changed (new version or process start)", prev.ProcessStart, id.ProcessStart)
	}
	r.observeIdentity(iid, id) // after the exclusion: a released hold never lets the new process serve unvalidated
}

func (r *Router) excludeProcess(iid, reason string, previous, observed float64) {
	r.log.Warn("engine process excluded", "iid", iid, "reason", reason)
	r.lifecycleEvent("process_excluded", map[string]any{"iid": iid, "reason": reason,
		"previous_process_start": previous, "observed_process_start": observed})
	r.eject(iid, "process_identity", false)
}

// identity reads the engine's version and process start. A missing
// process_start_time_seconds (vLLM with several API server processes)
// leaves the start unknown on an uncontracted fleet: restarts are then
// told by the version alone.
func (r *Router) identity(ctx context.Context, iid string) (lifecycle.Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	c := r.engines[iid].client
	v, e := c.Version(ctx)
	if e != nil {
		return lifecycle.Identity{}, e
	}
	start, e := c.ProcessStart(ctx)
	if e != nil {
		if r.cfg.EngineContract != nil {
			return lifecycle.Identity{}, e
		}
		start = 0
	}
	return lifecycle.Identity{Version: v, ProcessStart: start}, nil
}

// captureIdentities records every reachable engine's identity at start,
// decides the fleet's build from them (in iid order, so that a tie is
// deterministic) and checks each engine accepts the router's credential.
func (r *Router) captureIdentities(ctx context.Context) {
	if r.cfg.EngineContract != nil {
		for i, e := range r.cfg.Engines {
			if e.AttestationURL == "" {
				r.log.Warn("engine_contract is declared but the engine has no attestation sidecar: its readmission will fail the attestation gate",
					"iid", e.IID, "field", fmt.Sprintf("engines[%d].attestation_url", i))
			}
		}
	}
	ids := make([]*lifecycle.Identity, len(r.order))
	r.forEach(ctx, r.order, func(ctx context.Context, iid string) {
		i := slices.Index(r.order, iid)
		if id, err := r.identity(ctx, iid); err == nil {
			ids[i] = &id
		} else {
			r.log.Warn("could not read the engine identity at start", "iid", iid, "err", err)
		}
		pctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
		defer cancel()
		r.credentialProbe(pctx, iid)
	})
	for i, id := range ids {
		if id != nil {
			r.life.CheckIdentity(r.order[i], *id)
			r.observeIdentity(r.order[i], *id)
		}
	}
	r.checkProfileGenerations(ctx, ids)
}

// forEach runs f for every iid concurrently and waits.
func (r *Router) forEach(ctx context.Context, iids []string, f func(ctx context.Context, iid string)) {
	var wg sync.WaitGroup
	for _, iid := range iids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx, iid)
		}()
	}
	wg.Wait()
}

func allOK(checks []lifecycle.Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
}
