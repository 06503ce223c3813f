package router

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Holds (lifecycle/holds.go) keep out engines that answer but must not
// serve: another build, refused KV, a refused credential. lifecycle
// decides them; the router feeds it what the engines answered and makes
// each transition visible once: a log line with the iid, the
// narwhal_engine_held gauge, a journal event, the core's live set.

// holdsSeen is the holds the router last published.
type holdsSeen struct {
	mu   sync.Mutex // guards seen; held while diffing so each transition is told once, in order
	seen map[string]lifecycle.Hold
}

func holdKey(h lifecycle.Hold) string { return h.IID + " " + h.Cause }

// publishHolds makes the holds that started or ended since the last call
// visible; why is what lifted the ones that ended.
func (r *Router) publishHolds(why string) {
	if r.diffHolds(why) {
		r.syncLive()
		r.stateChanged()
	}
}

// diffHolds logs, exports and journals the transitions since the last
// call and reports whether there were any.
func (r *Router) diffHolds(why string) bool {
	r.holds.mu.Lock()
	defer r.holds.mu.Unlock()
	now := map[string]lifecycle.Hold{}
	for _, h := range r.life.Holds() {
		now[holdKey(h)] = h
	}
	changed := false
	for k, h := range now {
		if _, ok := r.holds.seen[k]; !ok {
			changed = true
			r.log.Warn("engine held out", "iid", h.IID, "cause", h.Cause, "detail", h.Detail)
			r.metrics.SetHeld(h.IID, h.Cause, true)
			r.journalEvent(journal.Event{Name: journal.EventEngineHoldStarted, At: r.now(),
				Fields: map[string]any{"iid": h.IID, "kind": h.Cause, "duration_s": nil, "detail": h.Detail}})
		}
	}
	for k, h := range r.holds.seen {
		if _, ok := now[k]; !ok {
			changed = true
			r.log.Info("engine released", "iid", h.IID, "cause", h.Cause, "by", why)
			r.metrics.SetHeld(h.IID, h.Cause, false)
			r.journalEvent(journal.Event{Name: journal.EventEngineHoldEnded, At: r.now(),
				Fields: map[string]any{"iid": h.IID, "kind": h.Cause, "cause": why, "held_s": r.now() - h.Since}})
		}
	}
	r.holds.seen = now
	return changed
}

// credentialProbe asks an authenticated route (GET /v1/models: vLLM
// checks --api-key on /v1 paths, never on /health) whether the engine
// accepts the router's credential. Only a 401/403 is its verdict: other
// failures are the health checks' business. The same answer carries the
// engine's max_model_len, so the context limit is learned here too rather
// than by a second request.
func (r *Router) credentialProbe(ctx context.Context, iid string) *vllm.Error {
	cards, e := r.engines[iid].client.ModelCards(ctx)
	if e == nil {
		r.noteModelCards(iid, cards)
	}
	switch {
	case e.AuthFailed():
		r.credentialRefused(iid, e)
		return e
	case e == nil:
		if r.life.Release(iid, lifecycle.HoldEngineAuth) {
			r.publishHolds("verification")
		}
	}
	return nil
}

// credentialRefused holds iid out: every request through it would fail.
func (r *Router) credentialRefused(iid string, e *vllm.Error) {
	detail := fmt.Sprintf("refused the router's credential (HTTP %d): engine.engine_api_key_env must name a variable holding this engine's --api-key when narwhal-serve starts", e.Status)
	if r.cfg.Engine.EngineAPIKeyEnv == "" {
		detail = fmt.Sprintf("refused a request without a credential (HTTP %d): set engine.engine_api_key_env to a variable holding this engine's --api-key", e.Status)
	}
	if r.life.Hold(iid, lifecycle.HoldEngineAuth, detail, r.now()) {
		r.publishHolds("")
	}
}

// observeIdentity applies the build rule to the version iid reported and
// lifts an incompatible-kv hold from a new process.
func (r *Router) observeIdentity(iid string, id lifecycle.Identity) {
	r.life.ObserveVersion(iid, id.Version, r.now())
	r.life.NewProcess(iid, id.ProcessStart)
	r.publishHolds("verification")
}

// holdSupersedes ends the ejection of an engine a hold now keeps out
// (another build, say, found by its readmission probe): the hold says
// why, and its probes watch the process accepted here for the next
// change, which is validated like any restart.
func (r *Router) holdSupersedes(iid string, id lifecycle.Identity) {
	r.life.AcceptIdentity(iid, id)
	if r.life.Recovered(iid) {
		r.syncLive()
		r.stateChanged()
	}
}

// kvRefused handles a NIXL handshake refusal between consumer and
// producer on a live leg: the odd engine of the pair is held out.
func (r *Router) kvRefused(consumer, producer string, hs vllm.Handshake) {
	r.life.KVRefused(consumer, producer, hs.LocalHash, hs.RemoteHash, r.now())
	r.publishHolds("verification")
}

// holdProbes re-examines held engines every recovery.readmit_every
// passes: the credential, the build and the process. An ejected engine is
// left to the readmission probe, which does the same before readmitting.
func (r *Router) holdProbes(ctx context.Context) {
	if every := max(1, r.cfg.Recovery.ReadmitEvery); r.passes%every != 0 {
		return
	}
	ejected := r.life.Ejected()
	var due []string
	for _, iid := range r.life.Held() {
		if _, out := ejected[iid]; !out {
			due = append(due, iid)
		}
	}
	r.forEach(ctx, due, func(ctx context.Context, iid string) {
		if r.healthProbe(ctx, iid) != nil {
			return
		}
		r.checkIdentity(ctx, iid) // a restarted process is excluded first, then revalidated
	})
}

// coverageLocked is "" when live engines can take both legs, else what is
// missing: a role needs a live engine of that role, or a live unpinned one
// to fall back on. Called with r.mu held.
func (r *Router) coverageLocked() string {
	var missing []string
	for _, role := range []fleet.Role{fleet.Prefill, fleet.Decode} {
		covered := false
		for _, iid := range r.order {
			i := r.core.Instance(iid)
			covered = covered || (i != nil && i.Live && (i.Role == role || !i.Pin))
		}
		if !covered {
			missing = append(missing, string(role))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "no live engine can take the " + strings.Join(missing, " or ") + " leg"
}

// holdsReason lists the holds for a readiness reason ("" when none).
func (r *Router) holdsReason() string {
	var parts []string
	for _, h := range r.life.Holds() {
		parts = append(parts, fmt.Sprintf("%s held out as %s: %s", h.IID, h.Cause, h.Detail))
	}
	return strings.Join(parts, "; ")
}

// unready is the readiness reason when no engine, or no engine for a
// role, can take work: it starts with reasonNoEngines and names the holds
// behind it.
func (r *Router) unready(missing string) string {
	reason := reasonNoEngines
	if missing != "" {
		reason += ": " + missing
	}
	if held := r.holdsReason(); held != "" {
		reason += "; " + held
	}
	return reason
}
