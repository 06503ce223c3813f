package router

import (
	"context"

	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// probes are the engine checks the availability supervisor runs
// (avail.Probes): internal/probe's, over the router's own engine clients,
// with one set of bounds (probe.FleetTimeouts).
type probes struct{ r *Router }

// cutProbeTokens is how many tokens the readmission probe of an engine
// ejected for cuts must stream before [DONE].
const cutProbeTokens = 16

// newProber builds the router's prober over its engine clients.
func (r *Router) newProber() *probe.Prober {
	return probe.New(r.cfg, probe.Options{IDs: r.ids,
		Clients: func(iid string) *vllm.Client { return r.engines[iid].client }})
}

// Health is GET /health; the supervisor follows it with the credential
// probe and bounds both by engine.health_timeout_s.
func (p probes) Health(ctx context.Context, iid string) *vllm.Error {
	return p.r.probe.Health(ctx, iid)
}

// Inference asks the engine for two tokens directly.
func (p probes) Inference(ctx context.Context, iid string) *vllm.Error {
	return p.r.probe.Inference(ctx, iid)
}

// Credential asks an authenticated route (GET /v1/models: vLLM checks
// --api-key on /v1 paths, never on /health) whether the engine accepts
// the router's credential. The same answer carries the engine's
// max_model_len, so the context limit is learned here too rather than by
// a second request.
func (p probes) Credential(ctx context.Context, iid string) *vllm.Error {
	c := p.r.probe.Credential(ctx, iid)
	if c.Err == nil {
		p.r.models.Note(iid, p.r.cfg.Model, c.Cards)
	}
	return c.Err
}

// Identity reads the engine's version and process start (a missing start
// is allowed on an uncontracted fleet: probe.LiveIdentity).
func (p probes) Identity(ctx context.Context, iid string) (lifecycle.Identity, error) {
	id, e := p.r.probe.LiveIdentity(ctx, iid)
	if e != nil {
		return lifecycle.Identity{}, e
	}
	return lifecycle.Identity{Version: id.Version, ProcessStart: id.ProcessStart}, nil
}

// Stream asks iid for a stream of cutProbeTokens tokens directly; nil
// when it reached [DONE] with all of them.
func (p probes) Stream(ctx context.Context, iid string) *vllm.Error {
	return p.r.probe.Stream(ctx, iid, cutProbeTokens)
}

// Model checks the engine serves the fleet's model.
func (p probes) Model(ctx context.Context, iid string) error {
	return p.r.probe.ServedModel(ctx, iid)
}

// Attestation verifies the engine's sidecar: the attested contract must
// be the fleet's and its process identity the live one.
func (p probes) Attestation(ctx context.Context, iid string) error {
	_, err := p.r.probe.Attestation(ctx, iid, p.r.cfg.EngineContract)
	return err
}

// Transfer moves KV from the candidate iid to the live peer: a prefill
// leg there and a decode leg on the peer must produce tokens.
func (p probes) Transfer(ctx context.Context, iid, peer string) error {
	_, err := p.r.probe.KVTransfer(ctx, iid, peer, probe.Transfer{})
	return err
}

// AttestationDigest verifies iid's sidecar against the live identity id
// and returns its attestation digest, which the profile generation binds.
func (p probes) AttestationDigest(ctx context.Context, iid string, id lifecycle.Identity) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.r.probe.Timeouts().Control)
	defer cancel()
	pl, err := p.r.probe.Attest(ctx, iid, vllm.Identity{Version: id.Version, ProcessStart: id.ProcessStart}, p.r.cfg.EngineContract)
	if err != nil {
		return "", err
	}
	return pl.AttestationDigest, nil
}
