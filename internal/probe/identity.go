package probe

import (
	"context"
	"fmt"
	"strings"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Identity reads iid's process identity within Control: /version and
// process_start_time_seconds on /metrics, both required.
func (p *Prober) Identity(ctx context.Context, iid string) (vllm.Identity, error) {
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	return p.Client(iid).Identity(ctx)
}

// LiveIdentity is Identity as the router watches engines: on a fleet
// without engine_contract a missing process_start_time_seconds (vLLM
// with several API server processes) leaves ProcessStart 0, so restarts
// are told by the version alone; a contracted fleet requires it.
func (p *Prober) LiveIdentity(ctx context.Context, iid string) (vllm.Identity, error) {
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	c := p.Client(iid)
	v, e := c.Version(ctx)
	if e != nil {
		return vllm.Identity{}, e
	}
	start, e := c.ProcessStart(ctx)
	if e != nil && p.cfg.EngineContract != nil {
		return vllm.Identity{}, e
	}
	return vllm.Identity{Version: v, ProcessStart: start}, nil
}

// Attestation stages: where an attestation failed.
const (
	StageURL      = "attestation_url" // the engine has no sidecar configured
	StageIdentity = "identity"        // the engine's own identity is unreadable
	StageSidecar  = "sidecar"         // the sidecar did not answer 200
	StageVerify   = "verify"          // the payload does not verify
)

// AttestError is a failed attestation of one engine.
type AttestError struct {
	IID   string
	Index int    // the engine's position in engines[]
	URL   string // its attestation_url
	Stage string // one of the Stage constants
	Err   error  // the identity or sidecar failure
	Fails []string

	ident error // Err at StageIdentity
}

func (e *AttestError) Error() string {
	switch e.Stage {
	case StageURL:
		return fmt.Sprintf("attestation_url is not configured for %s: engine_contract needs a narwhal-attest sidecar beside every engine (set engines[%d].attestation_url)", e.IID, e.Index)
	case StageIdentity:
		return IdentityUnreadable(e.IID, e.ident).Error()
	case StageSidecar:
		return fmt.Sprintf("%s attestation sidecar unreadable: %v (after an engine restart, restart its sidecar too)", e.IID, e.Err)
	}
	return fmt.Sprintf("%s attestation at %s: %s", e.IID, e.URL, strings.Join(e.Fails, "; "))
}

// Unwrap is the identity or sidecar failure.
func (e *AttestError) Unwrap() error { return e.Err }

// IdentityUnreadable says that iid's identity could not be read.
func IdentityUnreadable(iid string, e error) error {
	return fmt.Errorf("%s engine identity unreadable (/version and process_start_time_seconds on /metrics): %s", iid, fault.Detail(e))
}

// Attest fetches iid's attestation within Control and verifies it against
// the live identity and, when declared is not nil, the declared contract
// (nil checks only that the payload is well-formed, consistently digested
// and bound to the live process). Sidecars never get the engine
// credential.
func (p *Prober) Attest(ctx context.Context, iid string, live vllm.Identity, declared *fleet.EngineContract) (*attest.Payload, error) {
	a, err := p.AttestRaw(ctx, iid, live, declared)
	return a.Payload, err
}

// Attested is a verified attestation and the bytes the sidecar served
// (narwhal-profile keeps them in its samples file).
type Attested struct {
	Payload *attest.Payload
	Raw     []byte
}

// AttestRaw is Attest keeping the payload's bytes as served.
func (p *Prober) AttestRaw(ctx context.Context, iid string, live vllm.Identity, declared *fleet.EngineContract) (Attested, error) {
	fail := p.attestFailure(iid)
	if fail.URL == "" {
		fail.Stage = StageURL
		return Attested{}, fail
	}
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	raw, err := attest.Fetch(ctx, p.sidecars, fail.URL)
	if err != nil {
		fail.Stage, fail.Err = StageSidecar, err
		return Attested{}, fail
	}
	payload, fails := attest.Verify(raw, declared, live)
	if len(fails) > 0 {
		fail.Stage, fail.Fails = StageVerify, fails
		return Attested{}, fail
	}
	return Attested{Payload: payload, Raw: raw}, nil
}

// Attestation reads iid's identity and attests it (Attest), both within
// one Control bound: the readmission gate and finalisation.
func (p *Prober) Attestation(ctx context.Context, iid string, declared *fleet.EngineContract) (*attest.Payload, error) {
	if fail := p.attestFailure(iid); fail.URL == "" {
		fail.Stage = StageURL // before reading anything: an engine without a sidecar cannot prove its build
		return nil, fail
	}
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	live, e := p.Identity(ctx, iid)
	if e != nil {
		fail := p.attestFailure(iid)
		fail.Stage, fail.Err, fail.ident = StageIdentity, e, e
		return nil, fail
	}
	return p.Attest(ctx, iid, live, declared)
}

// attestFailure is an AttestError about iid with its stage still to set.
func (p *Prober) attestFailure(iid string) *AttestError {
	ref := p.engines[iid]
	return &AttestError{IID: iid, Index: ref.index, URL: ref.attestURL}
}
