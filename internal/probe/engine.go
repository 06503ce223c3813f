package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Health is GET /health within Control: nil when the engine answers 200.
// vLLM's /health takes no credential; Credential tells whether the
// engine accepts the router's.
func (p *Prober) Health(ctx context.Context, iid string) error {
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	return p.Client(iid).Health(ctx)
}

// Credential is the credential probe's answer: GET /v1/models, a route on
// which vLLM checks --api-key.
type Credential struct {
	Cards []vllm.ModelCard // the served models, when Err is nil
	Err   error            // nil: the engine accepted the credential
}

// Refused is the engine's 401/403, or nil: only that is the probe's
// verdict on the credential; other failures belong to the health checks.
func (c Credential) Refused() error {
	if fault.As(c.Err).AuthFailed() {
		return c.Err
	}
	return nil
}

// Credential asks iid's /v1/models within Control.
func (p *Prober) Credential(ctx context.Context, iid string) Credential {
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	cards, e := p.Client(iid).ModelCards(ctx)
	return Credential{Cards: cards, Err: e}
}

// HealthAndCredential is Health and then Credential within one Control
// bound: the router's health probe, since a healthy engine that refuses
// the credential fails every request. e is the /health failure; the
// Credential is zero when /health failed.
func (p *Prober) HealthAndCredential(ctx context.Context, iid string) (Credential, error) {
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	if e := p.Client(iid).Health(ctx); e != nil {
		return Credential{}, e
	}
	return p.Credential(ctx, iid), nil
}

// ServedModel checks within Control that iid's /v1/models lists the
// fleet's model: cross-model KV reuse corrupts output silently.
func (p *Prober) ServedModel(ctx context.Context, iid string) error {
	ctx, cancel := bound(ctx, p.t.Control)
	defer cancel()
	ids, e := p.Client(iid).Models(ctx)
	if e != nil {
		return &ModelError{IID: iid, Model: p.cfg.Model, Err: e}
	}
	if !slices.Contains(ids, p.cfg.Model) {
		return &ModelError{IID: iid, Model: p.cfg.Model, Served: ids}
	}
	return nil
}

// ModelError is a failed served-model check.
type ModelError struct {
	IID    string
	Model  string   // the fleet's model
	Served []string // what the engine serves, when it answered
	Err    error    // the /v1/models failure, when it did not
}

func (e *ModelError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s /v1/models unreadable: %s", e.IID, fault.Detail(e.Err))
	}
	return fmt.Sprintf("%s does not serve model %q (serves %s); cross-model KV reuse corrupts output", e.IID, e.Model, strings.Join(e.Served, ", "))
}

// Unwrap is the engine failure, when there was one.
func (e *ModelError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// Inference asks iid for two tokens directly (a non-streamed completion)
// within FirstToken: the probe of an engine suspected of bad work.
func (p *Prober) Inference(ctx context.Context, iid string) error {
	ctx, cancel := bound(ctx, p.t.FirstToken)
	defer cancel()
	_, e := p.Client(iid).Complete(ctx, p.body("narwhal inference probe", 2, nil))
	return e
}

// body is a completions probe body for the fleet's model: prompt and
// max_tokens, plus the extra fields.
func (p *Prober) body(prompt string, maxTokens int, extra map[string]any) []byte {
	m := map[string]any{"model": p.cfg.Model, "prompt": prompt, "max_tokens": maxTokens}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("probe: marshal a probe body: %v", err)) // strings, numbers and bools always marshal
	}
	return b
}
