package avail

import (
	"context"
	"fmt"
	"slices"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// readmissionProbe is one ejected engine's readmission, a probe job the
// monitor pass starts for each engine its tick says is due: a healthy
// engine whose identity is the accepted one (or, on an uncontracted
// fleet, any healthy engine) returns to placement. Checks, identity, a
// contracted fleet's gates, then the verdict.
func (s *Supervisor) readmissionProbe(ctx context.Context, iid string) {
	id, ok := s.readmissionChecks(ctx, iid)
	if !ok {
		return
	}
	if s.observeIdentity(iid, id); slices.Contains(s.lf.Held(), iid) {
		s.holdSupersedes(iid, id)
		return
	}
	if s.cfg.EngineContract != nil {
		// A contracted fleet revalidates the process it found: the
		// generation and a KV transfer must work before it serves.
		checks, _ := s.gates(iid, nil, false)
		if !allOK(checks) {
			s.log.Warn("readmission validation failed", "iid", iid, "checks", checks)
			return
		}
	} else if err := s.profileGenerationGate(ctx, iid, id, ""); err != nil {
		s.log.Warn("readmission blocked by the profile generation", "iid", iid, "err", err)
		s.lifecycleEvent("profile_recovery_blocked", map[string]any{"iid": iid, "reason": err.Error()})
		return
	}
	s.lf.step(lifecycle.AcceptIdentity{IID: iid, ID: id})
	if s.lf.step(lifecycle.Recover{IID: iid}).Changed {
		s.publishLive()
		s.log.Info("engine readmitted", "iid", iid)
		s.journalEvent(journal.EngineReadmitted(s.now(), iid, "health"))
		s.metrics.Readmission(iid, "health")
		s.changed()
	}
}

// readmissionChecks are the probes an ejected engine passes before its
// identity decides: health, an inference probe for a suspect engine, a
// full stream for one ejected for cuts. It returns the identity read.
func (s *Supervisor) readmissionChecks(ctx context.Context, iid string) (vllm.Identity, bool) {
	if s.healthProbe(ctx, iid) != nil {
		return vllm.Identity{}, false
	}
	if s.lf.Suspect(iid) && s.probes.Inference(ctx, iid) != nil {
		return vllm.Identity{}, false
	}
	if s.lf.Ejected()[iid] == string(lifecycle.OutputCut) && s.probes.Stream(ctx, iid) != nil {
		return vllm.Identity{}, false // it still cuts streams
	}
	id, err := s.probes.Identity(ctx, iid)
	if err != nil {
		s.log.Warn("readmission probe could not read the engine identity", "iid", iid, "err", err)
		return vllm.Identity{}, false
	}
	return id, true
}

// livenessSweep probes every live engine's /health and identity. Misses
// eject at recovery.liveness_misses; a changed process is excluded until
// it is validated again.
func (s *Supervisor) livenessSweep() {
	var live []string
	for _, iid := range s.order {
		if s.Usable(iid) {
			live = append(live, iid)
		}
	}
	s.startJobs(live, s.livenessProbe)
}

// livenessProbe is one live engine's share of a sweep; a probe job.
func (s *Supervisor) livenessProbe(ctx context.Context, iid string) {
	if e := s.healthProbe(ctx, iid); e != nil {
		if fault.As(e).AuthFailed() {
			return // held out by the credential probe, not missing
		}
		if ctx.Err() == nil && s.failed(iid, lifecycle.Liveness) == lifecycle.Eject {
			s.eject(iid, string(lifecycle.Liveness), false)
		}
		return
	}
	s.succeeded(iid, "health")
	s.checkIdentity(ctx, iid)
}

// checkIdentity compares the engine's process with the accepted one.
func (s *Supervisor) checkIdentity(ctx context.Context, iid string) {
	id, err := s.probes.Identity(ctx, iid)
	if err != nil {
		if s.cfg.EngineContract != nil && ctx.Err() == nil {
			s.excludeProcess(iid, err.Error(), 0, 0)
		}
		return
	}
	if a := s.lf.step(lifecycle.CheckIdentity{IID: iid, Seen: id}); a.Changed {
		s.excludeProcess(iid, "the engine process changed (new version or process start)", a.Previous.ProcessStart, id.ProcessStart)
	}
	s.observeIdentity(iid, id) // after the exclusion: a released hold never lets the new process serve unvalidated
}

func (s *Supervisor) excludeProcess(iid, reason string, previous, observed float64) {
	s.log.Warn("engine process excluded", "iid", iid, "reason", reason)
	s.lifecycleEvent("process_excluded", map[string]any{"iid": iid, "reason": reason,
		"previous_process_start": previous, "observed_process_start": observed})
	s.eject(iid, "process_identity", false)
}

// CaptureIdentities records every reachable engine's identity, decides
// the fleet's build from them (in iid order, so that a tie is
// deterministic) and checks each engine accepts the router's credential.
// The router calls it at start and when it takes over from a primary.
func (s *Supervisor) CaptureIdentities(ctx context.Context) {
	if s.cfg.EngineContract != nil {
		for i, e := range s.cfg.Engines {
			if e.AttestationURL == "" {
				s.log.Warn("engine_contract is declared but the engine has no attestation sidecar: its readmission will fail the attestation gate",
					"iid", e.IID, "field", fmt.Sprintf("engines[%d].attestation_url", i))
			}
		}
	}
	ids := make([]*vllm.Identity, len(s.order))
	ForEach(ctx, s.order, func(ctx context.Context, iid string) {
		i := slices.Index(s.order, iid)
		if id, err := s.probes.Identity(ctx, iid); err == nil {
			ids[i] = &id
		} else {
			s.log.Warn("could not read the engine identity at start", "iid", iid, "err", err)
		}
		pctx, cancel := context.WithTimeout(ctx, s.probeTimeout())
		defer cancel()
		s.credentialProbe(pctx, iid)
	})
	for i, id := range ids {
		if id != nil {
			s.lf.step(lifecycle.CheckIdentity{IID: s.order[i], Seen: *id})
			s.observeIdentity(s.order[i], *id)
		}
	}
	s.checkProfileGenerations(ctx, ids)
}

func allOK(checks []lifecycle.Check) bool {
	for _, c := range checks {
		if !c.OK {
			return false
		}
	}
	return true
}
