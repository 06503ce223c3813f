package avail

import (
	"context"
	"strings"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// CutProbeTokens is how many tokens the readmission probe of an engine
// ejected for cuts must stream before [DONE].
const CutProbeTokens = 16

// FleetProbes are Probes over internal/probe's checks with one set of
// bounds (probe.FleetTimeouts): what the router hands the supervisor.
type FleetProbes struct {
	Prober *probe.Prober
	Fleet  *fleet.Config
	// Cards, when set, hears the served models every accepted credential
	// probe returns (the router learns max_model_len from them).
	Cards func(iid string, cards []vllm.ModelCard)
}

// Health is GET /health; the supervisor follows it with the credential
// probe and bounds both by engine.health_timeout_s.
func (p FleetProbes) Health(ctx context.Context, iid string) error {
	return p.Prober.Health(ctx, iid)
}

// Inference asks the engine for two tokens directly.
func (p FleetProbes) Inference(ctx context.Context, iid string) error {
	return p.Prober.Inference(ctx, iid)
}

// Credential asks an authenticated route (GET /v1/models: vLLM checks
// --api-key on /v1 paths, never on /health) whether the engine accepts
// the router's credential. The same answer carries the engine's
// max_model_len, so the context limit is learned here too rather than by
// a second request.
func (p FleetProbes) Credential(ctx context.Context, iid string) error {
	c := p.Prober.Credential(ctx, iid)
	if c.Err == nil && p.Cards != nil {
		p.Cards(iid, c.Cards)
	}
	return c.Err
}

// Identity reads the engine's version and process start (a missing start
// is allowed on an uncontracted fleet: probe.LiveIdentity).
func (p FleetProbes) Identity(ctx context.Context, iid string) (vllm.Identity, error) {
	id, e := p.Prober.LiveIdentity(ctx, iid)
	if e != nil {
		return vllm.Identity{}, e
	}
	return vllm.Identity{Version: id.Version, ProcessStart: id.ProcessStart}, nil
}

// Stream asks iid for a stream of CutProbeTokens tokens directly; nil
// when it reached [DONE] with all of them.
func (p FleetProbes) Stream(ctx context.Context, iid string) error {
	return p.Prober.Stream(ctx, iid, CutProbeTokens)
}

// Model checks the engine serves the fleet's model.
func (p FleetProbes) Model(ctx context.Context, iid string) error {
	return p.Prober.ServedModel(ctx, iid)
}

// Attestation verifies the engine's sidecar: the attested contract must
// be the fleet's and its process identity the live one. It returns the
// attestation digest.
//
// A verified attestation whose observed accelerator contradicts the
// fleet's hardware block (attest.CompareAccelerator, preflight's rule) is
// a *HardwareMismatch: the readmission gates report it as their own
// "hardware" check.
func (p FleetProbes) Attestation(ctx context.Context, iid string) (string, error) {
	pl, err := p.Prober.Attestation(ctx, iid, p.Fleet.EngineContract)
	if err != nil {
		return "", err
	}
	if p.Fleet.Hardware != nil {
		if m := attest.CompareAccelerator(pl.Accelerator, *p.Fleet.Hardware); len(m) > 0 {
			return pl.AttestationDigest, &HardwareMismatch{IID: iid, Mismatches: m}
		}
	}
	return pl.AttestationDigest, nil
}

// HardwareMismatch is an attested engine on other hardware than the
// fleet declares.
type HardwareMismatch struct {
	IID        string
	Mismatches []attest.HardwareMismatch
}

func (h *HardwareMismatch) Error() string {
	msgs := make([]string, len(h.Mismatches))
	for i, m := range h.Mismatches {
		msgs[i] = m.Message(h.IID)
	}
	return strings.Join(msgs, "; ")
}

// Transfer moves KV from the candidate iid to the live peer: a prefill
// leg there and a decode leg on the peer must produce tokens.
func (p FleetProbes) Transfer(ctx context.Context, iid, peer string) error {
	_, err := p.Prober.KVTransfer(ctx, iid, peer, probe.Transfer{})
	return err
}

// AttestationDigest verifies iid's sidecar against the live identity id
// and returns its attestation digest, which the profile generation binds.
func (p FleetProbes) AttestationDigest(ctx context.Context, iid string, id vllm.Identity) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Prober.Timeouts().Control)
	defer cancel()
	pl, err := p.Prober.Attest(ctx, iid, vllm.Identity{Version: id.Version, ProcessStart: id.ProcessStart}, p.Fleet.EngineContract)
	if err != nil {
		return "", err
	}
	return pl.AttestationDigest, nil
}
