// Package probe holds the engine checks that preflight (check), the
// router's readmission and liveness probes, and finalisation (narwhal
// fleet finalize) share: health, the credential probe, identity and
// attestation verification, the served-model check, direct inference and
// stream probes, the decode-stream reader and the directed KV-transfer
// probe. Every probe talks to engines through internal/vllm only, with one
// client policy and one set of timeouts, both taken from the fleet
// document:
//
//	Control    engine.health_timeout_s        one control exchange: /health, identity
//	                                          (/version + /metrics), /v1/models, a sidecar
//	FirstToken max(engine.first_token_timeout_s, engine.health_timeout_s)
//	                                          a direct inference or stream probe; the silence
//	                                          before a probe stream's first token
//	DecodeRead engine.decode_read_timeout_s   silence between a probe stream's tokens (0: none)
//	Prefill    serving.prefill_timeout_s      a KV probe's producer leg
//	Request    serving.request_timeout_s      a whole KV-transfer probe
//
// A bound applies on top of the caller's context: the earlier deadline
// wins, so a caller may still bound a sequence of probes as a whole.
package probe

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Timeouts are the probes' bounds (see the package comment for the fleet
// field each comes from). A bound ≤ 0 adds none.
type Timeouts struct {
	Control    time.Duration
	FirstToken time.Duration
	DecodeRead time.Duration
	Prefill    time.Duration
	Request    time.Duration
}

// FleetTimeouts derives the probes' bounds from a loaded fleet.
func FleetTimeouts(cfg *fleet.Config) Timeouts {
	e, s := cfg.Engine, cfg.Serving
	return Timeouts{
		Control:    units.Seconds(e.HealthTimeoutS),
		FirstToken: units.Seconds(max(e.FirstTokenTimeoutS, e.HealthTimeoutS)),
		DecodeRead: units.Seconds(e.DecodeReadTimeoutS),
		Prefill:    units.Seconds(s.PrefillTimeoutS),
		Request:    units.Seconds(s.RequestTimeoutS),
	}
}

// Options configure a Prober; every field has a default.
type Options struct {
	// APIKey is the engine credential (the value of
	// engine.engine_api_key_env), sent as Bearer to engines and never to
	// sidecars. Ignored when Clients is set.
	APIKey string
	// Clients shares existing engine clients (the router's), so probes
	// and traffic use the same connections. Default: the Prober builds
	// one control client per engine (ControlClient) and Close closes them.
	Clients func(iid string) *vllm.Client
	// Sidecars fetches attestations. Default: a direct client (no proxy
	// from the environment, no credential).
	Sidecars *http.Client
	// IDs names probe requests and salts their prompts (cache_salt), so a
	// KV probe never hits a prefix cache. Default: random.
	IDs ports.IDGenerator
}

// Prober runs probes against one fleet's engines. It is safe for
// concurrent use.
type Prober struct {
	cfg      *fleet.Config
	t        Timeouts
	engines  map[string]engineRef
	clients  func(iid string) *vllm.Client
	owned    map[string]*vllm.Client // built here; closed by Close
	sidecars *http.Client
	ids      ports.IDGenerator
}

// engineRef is what a probe needs to know about an engine besides its client.
type engineRef struct {
	index     int    // position in engines[], for field paths
	attestURL string // engines[].attestation_url
}

// New returns a Prober for cfg's engines.
func New(cfg *fleet.Config, o Options) *Prober {
	p := &Prober{cfg: cfg, t: FleetTimeouts(cfg), engines: map[string]engineRef{}, clients: o.Clients,
		sidecars: o.Sidecars, ids: o.IDs}
	for i, e := range cfg.Engines {
		p.engines[e.IID] = engineRef{index: i, attestURL: e.AttestationURL}
	}
	if p.clients == nil {
		p.owned = map[string]*vllm.Client{}
		for _, e := range cfg.Engines {
			p.owned[e.IID] = ControlClient(cfg, e.URL, o.APIKey)
		}
		p.clients = func(iid string) *vllm.Client { return p.owned[iid] }
	}
	if p.sidecars == nil {
		p.sidecars = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	if p.ids == nil {
		p.ids = ports.RandomIDs()
	}
	return p
}

// ControlClient is the client policy for probes that do not share the
// router's clients: engine.connect_timeout_s to connect,
// engine.control_connections connections (half kept idle) and
// serving.max_response_bytes per response.
func ControlClient(cfg *fleet.Config, url, apiKey string) *vllm.Client {
	n := cfg.Engine.ControlConnections
	return vllm.NewClient(url, vllm.Options{APIKey: apiKey, ConnectTimeout: units.Seconds(cfg.Engine.ConnectTimeoutS),
		MaxConns: n, IdleConns: max(1, n/2), MaxResponse: int64(cfg.Serving.MaxResponseBytes)})
}

// Timeouts are the bounds this Prober applies.
func (p *Prober) Timeouts() Timeouts { return p.t }

// Client is iid's engine client, for the callers' own engine calls
// (preflight's pace and tokenize gates). iid must be one of the fleet's
// engines.
func (p *Prober) Client(iid string) *vllm.Client {
	c := p.clients(iid)
	if c == nil {
		panic(fmt.Sprintf("probe: %q is not an engine of this fleet", iid))
	}
	return c
}

// Close releases the clients the Prober built and idle sidecar
// connections.
func (p *Prober) Close() {
	for _, c := range p.owned {
		c.Close()
	}
	p.sidecars.CloseIdleConnections()
}

// bound applies d on top of ctx; d ≤ 0 adds no deadline.
func bound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
