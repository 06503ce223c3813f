package router

import (
	"context"
	"fmt"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
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

// cutProbeTokens is how many tokens the readmission probe of an engine
// ejected for cuts must stream before [DONE].
const cutProbeTokens = 16

// isCut reports whether a decode leg that failed after tokens arrived was
// cut by the engine: not a client that went away, not a router-side limit.
func isCut(e *vllm.Error, tokens int) bool {
	if tokens <= 0 || e == errClientGone {
		return false
	}
	switch e.Reason {
	case vllm.ReasonLocalPool, vllm.ReasonRejected, vllm.ReasonResponseLimit:
		return false
	}
	return true
}

// streamCut records a cut on iid: the breaker's output_cut class, an
// ejection at its threshold when another engine covers the role, and a
// timed rest otherwise.
func (r *Router) streamCut(iid string, e *vllm.Error) {
	r.log.Warn("engine cut a decode stream after output started", "iid", iid, "err", e.Msg)
	if r.life.Failure(iid, lifecycle.OutputCut) == lifecycle.EjectCovered {
		r.eject(iid, string(lifecycle.OutputCut), true) // never the last of its role
		return
	}
	q := r.cfg.Recovery.FailureQuarantineS
	if q <= 0 {
		q = cutQuarantineS
	}
	r.quarantineFor(iid, q)
}

// quarantineFor rests iid for q seconds when another live engine covers
// its role.
func (r *Router) quarantineFor(iid string, q float64) {
	if q <= 0 || r.lastOfRole(iid) {
		return
	}
	if r.life.Quarantine(iid, r.now()+q) {
		r.holdLen.Store(iid, q)
		r.syncLive()
		r.journalEvent(journal.Event{Name: journal.EventEngineHoldStarted, At: r.now(),
			Fields: map[string]any{"iid": iid, "kind": "timed", "duration_s": q}})
	}
}

// heldFor is the length of iid's last timed hold.
func (r *Router) heldFor(iid string) float64 {
	if q, ok := r.holdLen.Load(iid); ok {
		return q.(float64)
	}
	return r.cfg.Recovery.FailureQuarantineS
}

// streamProbe asks iid for a stream of cutProbeTokens tokens directly;
// nil when it reached [DONE] with all of them.
func (r *Router) streamProbe(ctx context.Context, iid string) *vllm.Error {
	d := max(r.cfg.Engine.FirstTokenTimeoutS, r.cfg.Engine.HealthTimeoutS)
	ctx, cancel := context.WithTimeout(ctx, units.Seconds(d))
	defer cancel()
	body := mustRaw(map[string]any{"model": r.cfg.Model, "prompt": "narwhal stream probe", "stream": true,
		"max_tokens": cutProbeTokens, "min_tokens": cutProbeTokens, "return_token_ids": true})
	s, e := r.engines[iid].client.OpenStream(ctx, "/v1/completions", body, "narwhal-stream-probe-"+iid)
	if e != nil {
		return e
	}
	defer s.Close()
	tokens := 0
	for {
		ev, e := s.Next()
		if e != nil {
			return e
		}
		if ev.Done {
			break
		}
		tokens += ev.Tokens
	}
	if tokens < cutProbeTokens {
		return &vllm.Error{Phase: "decode", Reason: vllm.ReasonInvalidResponse, Class: string(lifecycle.OutputCut),
			Msg: fmt.Sprintf("stream probe ended after %d of %d tokens", tokens, cutProbeTokens)}
	}
	return nil
}
