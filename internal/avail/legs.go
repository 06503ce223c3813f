package avail

import (
	"context"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Leg outcomes feed the breaker. Its verdicts act off the request path:
// ejections at once, verifications in the background.

// LegSucceeded records a leg that did its job on iid: kind is "prefill"
// (a handoff extracted) or "decode" (a stream reached [DONE]).
// A clean engine (the usual case) takes no lock: Marked is atomic.
func (s *Supervisor) LegSucceeded(iid, kind string) { s.succeeded(iid, kind) }

// succeeded steps a success into the core when it may clear something.
func (s *Supervisor) succeeded(iid, kind string) {
	if s.life.Marked(iid) {
		s.step(s.now(), lifecycle.LegSuccess{IID: iid, Kind: kind})
	}
}

// failed steps a failed leg into the core and returns its verdict.
func (s *Supervisor) failed(iid string, c lifecycle.Class) lifecycle.Verdict {
	for _, v := range s.step(s.now(), lifecycle.LegFailure{IID: iid, Class: c}).Verdicts {
		if v.IID == iid {
			return v.Verdict
		}
	}
	return lifecycle.None
}

// Failure is one failed leg as the request path saw it.
type Failure struct {
	IID  string
	Err  *fault.Error
	Peer string // the decode leg's producer; "" for a prefill leg
	// Tokens is how many tokens the decode leg streamed before it failed:
	// a stream that produced output and then ended is a cut.
	Tokens int
}

// legQueue bounds the failed legs waiting for the leg goroutine.
const legQueue = 256

// LegFailed reports a failed leg with one non-blocking send to the
// supervisor's leg goroutine, which applies it (recordLeg): the request
// goes on at once, its own retry already excludes the engine. When the
// queue is full (failures arriving faster than the breaker takes them)
// the request goroutine applies this one itself, as the only way that
// neither waits for the queue nor loses a breaker count; InlineLegs and
// narwhal_leg_reports_inline_total count those.
func (s *Supervisor) LegFailed(f Failure) {
	select {
	case s.legs <- f:
	default:
		s.inlineLegs.Add(1)
		s.metrics.LegReportsInline.Inc()
		s.recordLeg(f)
	}
}

// Verifications is how many breaker verifications have ended (a test
// waits on it to know one ran).
func (s *Supervisor) Verifications() int64 { return s.verified.Load() }

// InlineLegs is how many failed legs a full queue made their request
// goroutine apply itself.
func (s *Supervisor) InlineLegs() int64 { return s.inlineLegs.Load() }

// legLoop is the leg goroutine: it applies the failed legs of legs in
// the order they were reported, until the router closes.
func (s *Supervisor) legLoop(ctx context.Context, legs <-chan Failure) {
	for {
		select {
		case f := <-legs:
			s.recordLeg(f)
		case <-ctx.Done():
			return
		}
	}
}

// recordLeg records a failed leg and acts on the verdict: nothing for a
// fault that is not the engine's, a hold for a refused credential or
// refused KV, a rest and a breaker streak otherwise.
func (s *Supervisor) recordLeg(f Failure) {
	if f.Err.CutAfter(f.Tokens) {
		s.streamCut(f.IID, f.Err)
		return
	}
	iid, e := f.IID, f.Err
	producer := ""
	if f.Peer != iid {
		producer = f.Peer
	}
	hs, refused := vllm.HandshakeRefusal(e)
	switch {
	case e.Reason == fault.LocalPool:
		return // not the engine's fault
	case e.AuthFailed():
		s.credentialRefused(iid, e) // held out, not a breaker fault: it answers, just not to us
		return
	case refused && producer != "":
		s.kvRefused(iid, producer, hs) // incompatible, not broken: retrying this pair cannot work
		return
	case e.Reason == fault.EngineRejected:
		s.succeeded(iid, "answered") // a 4xx: the engine is up
		return
	}
	s.quarantine(iid)
	switch s.failed(iid, e.Class) {
	case lifecycle.Eject:
		s.eject(iid, string(lifecycle.Connection), false)
	case lifecycle.VerifyHealth:
		s.goBg(func(ctx context.Context) { s.verify(ctx, iid, false) })
	case lifecycle.VerifyInference:
		s.goBg(func(ctx context.Context) { s.verify(ctx, iid, true) })
	}
}

// quarantine rests an engine whose leg just failed for
// recovery.failure_quarantine_s, when another live engine covers its role.
func (s *Supervisor) quarantine(iid string) { s.quarantineFor(iid, s.cfg.Recovery.FailureQuarantineS) }

// releaseQuarantines returns engines whose timed hold ended (the monitor
// pass learns them from its tick's Ready instead).
func (s *Supervisor) releaseQuarantines() { s.released(s.lf.step(lifecycle.ReleaseQuarantines{}).IIDs) }

// released publishes and journals the end of the timed holds of iids.
func (s *Supervisor) released(iids []string) {
	for _, iid := range iids {
		s.publishLive()
		s.journalEvent(journal.Event{Name: journal.EventEngineHoldEnded, At: s.now(),
			Fields: map[string]any{"iid": iid, "kind": "timed", "cause": "expired", "held_s": s.heldFor(iid)}})
	}
}

// verify probes a suspect engine once: /health for timeout-shaped
// failures, a direct completion for bad work. Only a failed probe ejects,
// so a busy but healthy engine keeps serving.
func (s *Supervisor) verify(ctx context.Context, iid string, inference bool) {
	if _, busy := s.verifying.LoadOrStore(iid, true); busy {
		return // one verification per engine at a time
	}
	defer s.verifying.Delete(iid)
	defer s.verified.Add(1)
	var e error
	if inference {
		e = s.probes.Inference(ctx, iid)
	} else {
		e = s.healthProbe(ctx, iid)
	}
	if ctx.Err() != nil {
		return
	}
	if e == nil {
		s.succeeded(iid, map[bool]string{true: "inference", false: "health"}[inference])
		return
	}
	if fe := fault.As(e); fe.AuthFailed() {
		s.credentialRefused(iid, fe) // held out instead of ejected
		return
	}
	s.log.Warn("engine failed its verification probe", "iid", iid, "err", fault.Detail(e))
	s.eject(iid, string(lifecycle.Connection), true)
}

// healthProbe is GET /health and then the credential probe: vLLM's
// /health is unauthenticated, so a wrong engine key would look healthy
// while every request fails.
func (s *Supervisor) healthProbe(ctx context.Context, iid string) error {
	ctx, cancel := context.WithTimeout(ctx, s.probeTimeout())
	defer cancel()
	if e := s.probes.Health(ctx, iid); e != nil {
		return e
	}
	return s.credentialProbe(ctx, iid)
}

func (s *Supervisor) probeTimeout() time.Duration {
	return units.Seconds(s.cfg.Engine.HealthTimeoutS)
}

// eject takes iid out of placement. A probe failure (protect) never removes
// the last live engine of a role; a connection ejection does, because the
// engine is gone either way.
func (s *Supervisor) eject(iid, cause string, protect bool) {
	if protect && s.lastOfRole(iid) {
		s.log.Warn("keeping the last live engine of its role in placement despite a failed probe", "iid", iid)
		return
	}
	if !s.lf.step(lifecycle.Ejection{IID: iid, Cause: cause}).Changed {
		return
	}
	s.publishLive()
	s.log.Warn("engine ejected", "iid", iid, "cause", cause)
	s.metrics.Ejection(iid, cause)
	s.journalEvent(journal.EngineEjected(s.now(), iid, cause))
	s.holdWave(iid + " ejected (" + cause + ")")
	s.changed()
}

// lastOfRole reports whether no other live engine has iid's role (iid
// itself may be live or already held out).
func (s *Supervisor) lastOfRole(iid string) bool {
	snap := s.core.Snapshot()
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
