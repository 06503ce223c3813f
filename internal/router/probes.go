package router

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// probes are the engine checks the availability supervisor runs
// (avail.Probes), over the router's engine clients.
type probes struct{ r *Router }

func (r *Router) probeTimeout() time.Duration {
	return units.Seconds(r.cfg.Engine.HealthTimeoutS)
}

// Health is GET /health; the supervisor follows it with the credential
// probe and bounds both by engine.health_timeout_s.
func (p probes) Health(ctx context.Context, iid string) *vllm.Error {
	return p.r.engines[iid].client.Health(ctx)
}

// Inference asks the engine for two tokens directly.
func (p probes) Inference(ctx context.Context, iid string) *vllm.Error {
	r := p.r
	d := max(r.cfg.Engine.FirstTokenTimeoutS, r.cfg.Engine.HealthTimeoutS)
	ctx, cancel := context.WithTimeout(ctx, units.Seconds(d))
	defer cancel()
	body := mustRaw(map[string]any{"model": r.cfg.Model, "prompt": "narwhal inference probe", "max_tokens": 2})
	_, e := r.engines[iid].client.Complete(ctx, body)
	return e
}

// Credential asks an authenticated route (GET /v1/models: vLLM checks
// --api-key on /v1 paths, never on /health) whether the engine accepts
// the router's credential. The same answer carries the engine's
// max_model_len, so the context limit is learned here too rather than by
// a second request.
func (p probes) Credential(ctx context.Context, iid string) *vllm.Error {
	cards, e := p.r.engines[iid].client.ModelCards(ctx)
	if e == nil {
		p.r.noteModelCards(iid, cards)
	}
	return e
}

// Identity reads the engine's version and process start. A missing
// process_start_time_seconds (vLLM with several API server processes)
// leaves the start unknown on an uncontracted fleet: restarts are then
// told by the version alone.
func (p probes) Identity(ctx context.Context, iid string) (lifecycle.Identity, error) {
	r := p.r
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

// cutProbeTokens is how many tokens the readmission probe of an engine
// ejected for cuts must stream before [DONE].
const cutProbeTokens = 16

// Stream asks iid for a stream of cutProbeTokens tokens directly; nil
// when it reached [DONE] with all of them.
func (p probes) Stream(ctx context.Context, iid string) *vllm.Error {
	r := p.r
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

// Model checks the engine serves the fleet's model.
func (p probes) Model(ctx context.Context, iid string) error {
	r := p.r
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	models, e := r.engines[iid].client.Models(ctx)
	if e != nil {
		return e
	}
	if !slices.Contains(models, r.cfg.Model) {
		return fmt.Errorf("the engine serves %v, not the fleet's model %q", models, r.cfg.Model)
	}
	return nil
}

// Attestation verifies the engine's sidecar: the attested contract must
// be the fleet's and its process identity the live one (a sidecar answers
// 503 once its engine process changed). The gates run only on contracted
// fleets, so a missing attestation_url fails: an engine without a sidecar
// cannot prove its build.
func (p probes) Attestation(ctx context.Context, iid string) error {
	r := p.r
	url := r.attestURL[iid]
	if url == "" {
		return fmt.Errorf("attestation_url is not configured for %s: engine_contract needs a narwhal-attest sidecar beside every engine (set engines[%d].attestation_url)", iid, r.engineIndex(iid))
	}
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	body, err := attest.Fetch(ctx, http.DefaultClient, url)
	if err != nil {
		return fmt.Errorf("attestation sidecar: %w (after an engine restart, restart its sidecar too)", err)
	}
	live, err := p.Identity(ctx, iid)
	if err != nil {
		return err
	}
	if _, fails := attest.Verify(body, r.cfg.EngineContract, vllm.Identity{Version: live.Version, ProcessStart: live.ProcessStart}); len(fails) > 0 {
		return fmt.Errorf("attestation: %s", strings.Join(fails, "; "))
	}
	return nil
}

// engineIndex is iid's position in the fleet's engines list, for field
// paths.
func (r *Router) engineIndex(iid string) int {
	return slices.IndexFunc(r.cfg.Engines, func(e fleet.Engine) bool { return e.IID == iid })
}

// Transfer moves KV from the candidate iid to the live peer: a prefill
// leg there and a decode leg on the peer must produce tokens.
func (p probes) Transfer(ctx context.Context, iid, peer string) error {
	r := p.r
	body, _ := vllm.ParseBody([]byte(`{"prompt":"narwhal transfer probe","max_tokens":2}`))
	h, e := r.engines[iid].client.Prefill(ctx, "/v1/completions", vllm.PrefillBody(body, r.cfg.Model), "narwhal-probe-"+r.ids.NewID()+"-prefill")
	if e != nil {
		return e
	}
	s, e := r.engines[peer].client.OpenStream(ctx, "/v1/completions", vllm.DecodeBody(body, r.cfg.Model, h.Params), "narwhal-probe-"+r.ids.NewID()+"-decode")
	if e != nil {
		return fmt.Errorf("decode on %s with %s's KV: %w", peer, iid, e)
	}
	defer s.Close()
	tokens := 0
	for {
		ev, e := s.Next()
		if e != nil {
			return fmt.Errorf("decode on %s with %s's KV: %w", peer, iid, e)
		}
		tokens += ev.Tokens
		if ev.Done {
			break
		}
	}
	if tokens == 0 {
		return fmt.Errorf("decode on %s with %s's KV produced no tokens", peer, iid)
	}
	return nil
}
