package avail

import (
	"context"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Holds (lifecycle/holds.go) keep out engines that answer but must not
// serve: another build, refused KV, a refused credential. lifecycle
// decides them; the supervisor feeds it what the engines answered and
// makes each transition visible once: a log line with the iid, the
// narwhal_engine_held gauge, a journal event, the core's live set.

func holdKey(h lifecycle.Hold) string { return h.IID + " " + h.Cause }

// publishHolds makes the holds that started or ended since the last call
// visible; why is what lifted the ones that ended.
func (s *Supervisor) publishHolds(why string) {
	if s.diffHolds(why) {
		s.publishLive()
		s.changed()
	}
}

// credentialProbe asks the engine whether it accepts the router's
// credential (Probes.Credential) and holds it out, or releases it, on the
// answer. Only a 401/403 is its verdict: other failures are the health
// checks' business.
func (s *Supervisor) credentialProbe(ctx context.Context, iid string) error {
	e := s.probes.Credential(ctx, iid)
	switch {
	case fault.As(e).AuthFailed():
		s.credentialRefused(iid, fault.As(e))
		return e
	case e == nil:
		if s.lf.step(lifecycle.ReleaseHold{IID: iid, Cause: lifecycle.HoldEngineAuth}).Changed {
			s.publishHolds("verification")
		}
	}
	return nil
}

// credentialRefused holds iid out: every request through it would fail.
func (s *Supervisor) credentialRefused(iid string, e *fault.Error) {
	detail := fmt.Sprintf("refused the router's credential (HTTP %d): engine.engine_api_key_env must name a variable holding this engine's --api-key when narwhal-serve starts", e.Status)
	if s.cfg.Engine.EngineAPIKeyEnv == "" {
		detail = fmt.Sprintf("refused a request without a credential (HTTP %d): set engine.engine_api_key_env to a variable holding this engine's --api-key", e.Status)
	}
	if s.lf.step(lifecycle.HoldOut{IID: iid, Cause: lifecycle.HoldEngineAuth, Detail: detail}).Changed {
		s.publishHolds("")
	}
}

// observeIdentity applies the build rule to the version iid reported and
// lifts an incompatible-kv hold from a new process.
func (s *Supervisor) observeIdentity(iid string, id vllm.Identity) {
	s.lf.step(lifecycle.ObserveVersion{IID: iid, Version: id.Version})
	s.lf.step(lifecycle.NewProcess{IID: iid, Start: id.ProcessStart})
	s.publishHolds("verification")
}

// holdSupersedes ends the ejection of an engine a hold now keeps out
// (another build, say, found by its readmission probe): the hold says
// why, and its probes watch the process accepted here for the next
// change, which is validated like any restart.
func (s *Supervisor) holdSupersedes(iid string, id vllm.Identity) {
	s.lf.step(lifecycle.AcceptIdentity{IID: iid, ID: id})
	if s.lf.step(lifecycle.Recover{IID: iid}).Changed {
		s.publishLive()
		s.changed()
	}
}

// kvRefused handles a NIXL handshake refusal between consumer and
// producer on a live leg: the odd engine of the pair is held out.
func (s *Supervisor) kvRefused(consumer, producer string, hs vllm.Handshake) {
	s.lf.step(lifecycle.KVRefused{Consumer: consumer, Producer: producer, LocalHash: hs.LocalHash, RemoteHash: hs.RemoteHash})
	s.publishHolds("verification")
}

// holdProbes re-examines held engines every recovery.readmit_every
// passes: the credential, the build and the process. An ejected engine is
// left to the readmission probe, which does the same before readmitting.
func (s *Supervisor) holdProbes() {
	if every := max(1, s.cfg.Recovery.ReadmitEvery); s.passes%every != 0 {
		return
	}
	ejected := s.lf.Ejected()
	var due []string
	for _, iid := range s.lf.Held() {
		if _, out := ejected[iid]; !out {
			due = append(due, iid)
		}
	}
	s.startJobs(due, s.holdProbe)
}

// holdProbe re-examines one held engine; a probe job.
func (s *Supervisor) holdProbe(ctx context.Context, iid string) {
	if s.healthProbe(ctx, iid) != nil {
		return
	}
	s.checkIdentity(ctx, iid) // a restarted process is excluded first, then revalidated
}

// HoldsReason lists the holds for a readiness reason ("" when none).
func (s *Supervisor) HoldsReason() string {
	var parts []string
	for _, h := range s.lf.Holds() {
		parts = append(parts, fmt.Sprintf("%s held out as %s: %s", h.IID, h.Cause, h.Detail))
	}
	return strings.Join(parts, "; ")
}
