package check

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// run is one preflight's state: what each gate learned about each engine.
type run struct {
	o       Options
	cfg     *fleet.Config
	clients map[string]*vllm.Client

	live         map[string]bool            // answered /health 200
	identity     map[string]vllm.Identity   // read by the contract gate
	attested     map[string]*attest.Payload // verified attestations
	incompatible map[string]string          // iid → why KV must not touch it
	slow         map[string]bool            // pace failures
	handoffs     map[string]bool            // produce succeeded
	kvOK         map[string]bool            // a KV probe touching it passed
	kvFail       map[string]bool            // a KV probe touching it failed
	kvTried      map[string]bool            // took part in a KV probe
	contractFail bool                       // any contract FAIL line
}

func newRun(o Options) *run {
	r := &run{o: o, cfg: o.Fleet, clients: map[string]*vllm.Client{}, live: map[string]bool{},
		identity: map[string]vllm.Identity{}, attested: map[string]*attest.Payload{},
		incompatible: map[string]string{}, slow: map[string]bool{}, handoffs: map[string]bool{},
		kvOK: map[string]bool{}, kvFail: map[string]bool{}, kvTried: map[string]bool{}}
	es := o.Fleet.Engine
	for _, e := range o.Fleet.Engines {
		r.clients[e.IID] = vllm.NewClient(e.URL, vllm.Options{APIKey: o.APIKey, ConnectTimeout: units.Seconds(es.ConnectTimeoutS),
			MaxConns: es.ControlConnections, IdleConns: max(1, es.ControlConnections/2), MaxResponse: int64(o.Fleet.Serving.MaxResponseBytes)})
	}
	return r
}

func (r *run) close() {
	for _, c := range r.clients {
		c.Close()
	}
	r.o.Sidecars.CloseIdleConnections()
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// healthCtx bounds one control request by engine.health_timeout_s.
func (r *run) healthCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, units.Seconds(r.cfg.Engine.HealthTimeoutS))
}

// liveEngines are the reachable engines in configuration order.
func (r *run) liveEngines() []fleet.Engine {
	var out []fleet.Engine
	for _, e := range r.cfg.Engines {
		if r.live[e.IID] {
			out = append(out, e)
		}
	}
	return out
}

func (r *run) skipUnreachable(g *Gate) {
	for _, e := range r.cfg.Engines {
		if !r.live[e.IID] {
			g.add(Skip, e.IID, "%s unreachable", e.IID)
		}
	}
}

func (r *run) reach(ctx context.Context, g *Gate) {
	for _, e := range r.cfg.Engines {
		c, cancel := r.healthCtx(ctx)
		err := r.clients[e.IID].Health(c)
		cancel()
		if err != nil {
			g.add(Fail, e.IID, "%s /health did not answer 200: %s", e.IID, err.Msg)
			continue
		}
		r.live[e.IID] = true
		g.add(OK, e.IID, "%s /health 200", e.IID)
	}
}

// contract verifies every attested field and the process start before any
// KV moves: an engine that fails is incompatible and the KV gates skip.
func (r *run) contract(ctx context.Context, g *Gate) {
	defer func() {
		for _, l := range g.Lines {
			r.contractFail = r.contractFail || l.Status == Fail
		}
	}()
	k := r.cfg.EngineContract
	if k == nil {
		g.add(Skip, "", "no engine_contract declared; checking live vLLM versions only")
	} else {
		g.add(OK, "", "declared engine contract %s", k.Fingerprint())
		if miss := k.Missing(); len(miss) > 0 {
			g.add(Skip, "", "contract %s undeclared: %s", k.Fingerprint(), strings.Join(miss, ", "))
		}
	}
	versions := map[string][]string{}
	for _, e := range r.liveEngines() {
		id, ok := r.readIdentity(ctx, g, e)
		if !ok {
			continue
		}
		versions[id.Version] = append(versions[id.Version], e.IID)
		if k != nil {
			r.attestEngine(ctx, g, e, k, id)
		} else {
			g.add(OK, e.IID, "%s runs vLLM %s", e.IID, id.Version)
		}
	}
	if len(versions) > 1 {
		g.add(Fail, "", "mixed vLLM versions before KV transfer: %s", describeVersions(versions))
		for _, iids := range versions {
			for _, iid := range iids {
				r.incompatible[iid] = "mixed vLLM versions"
			}
		}
	}
	r.skipUnreachable(g)
}

func describeVersions(v map[string][]string) string {
	var parts []string
	for _, ver := range slices.Sorted(maps.Keys(v)) {
		parts = append(parts, ver+" on "+strings.Join(v[ver], ", "))
	}
	return strings.Join(parts, "; ")
}

func (r *run) readIdentity(ctx context.Context, g *Gate, e fleet.Engine) (vllm.Identity, bool) {
	c, cancel := r.healthCtx(ctx)
	defer cancel()
	id, err := r.clients[e.IID].Identity(c)
	if err != nil {
		g.add(Fail, e.IID, "%s engine identity unreadable (/version and process_start_time_seconds on /metrics): %s", e.IID, err.Msg)
		r.incompatible[e.IID] = "identity unreadable"
		return vllm.Identity{}, false
	}
	r.identity[e.IID] = id
	return id, true
}

func (r *run) attestEngine(ctx context.Context, g *Gate, e fleet.Engine, k *fleet.EngineContract, id vllm.Identity) {
	fail := func(format string, args ...any) {
		g.add(Fail, e.IID, e.IID+" "+format, args...)
		r.incompatible[e.IID] = "contract"
	}
	if id.Version != k.VLLMVersion {
		fail("runs vLLM %s, engine_contract.vllm_version is %s", id.Version, k.VLLMVersion)
		return
	}
	if e.AttestationURL == "" {
		fail("has no attestation_url; engine_contract needs a narwhal-attest sidecar beside every engine")
		return
	}
	raw, err := r.fetchAttestation(ctx, e.AttestationURL)
	if err != nil {
		fail("attestation unreadable: %v", err)
		return
	}
	p, fails := attest.Verify(raw, k, id)
	if len(fails) > 0 {
		for _, f := range fails {
			fail("attestation: %s", f)
		}
		return
	}
	r.attested[e.IID] = p
	g.add(OK, e.IID, "%s contract %s attested for process %.6f", e.IID, k.Fingerprint(), id.ProcessStart)
}

// fetchAttestation GETs a sidecar. Sidecar calls never carry the engine
// credential: the sidecar holds no secret and may sit on another host.
func (r *run) fetchAttestation(ctx context.Context, url string) ([]byte, error) {
	c, cancel := r.healthCtx(ctx)
	defer cancel()
	return attest.Fetch(c, r.o.Sidecars, url)
}

func (r *run) model(ctx context.Context, g *Gate) {
	for _, e := range r.liveEngines() {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		ids, err := r.clients[e.IID].Models(c)
		cancel()
		switch {
		case err != nil:
			g.add(Fail, e.IID, "%s /v1/models unreadable: %s", e.IID, err.Msg)
			r.incompatible[e.IID] = "model"
		case !contains(ids, r.cfg.Model):
			g.add(Fail, e.IID, "%s does not serve model %q (serves %s); cross-model KV reuse corrupts output", e.IID, r.cfg.Model, strings.Join(ids, ", "))
			r.incompatible[e.IID] = "model"
		default:
			g.add(OK, e.IID, "%s serves %s", e.IID, r.cfg.Model)
		}
	}
	r.skipUnreachable(g)
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func (r *run) tokenize(ctx context.Context, g *Gate) {
	if !r.cfg.Engine.Tokenize {
		g.add(Skip, "", "engine.tokenize is false: the router estimates tokens from characters")
		return
	}
	body := mustJSON(map[string]any{"model": r.cfg.Model, "prompt": words(r.o.ProbeWords)})
	for _, e := range r.liveEngines() {
		c, cancel := context.WithTimeout(ctx, units.Seconds(r.cfg.Engine.TokenizeTimeoutS))
		n, err := r.clients[e.IID].Tokenize(c, body)
		cancel()
		switch {
		case err != nil:
			g.add(Fail, e.IID, "%s /tokenize: %s (a character estimate's error is squared by the quadratic prefill model)", e.IID, err.Msg)
		case n == 0:
			g.add(Fail, e.IID, "%s /tokenize counted 0 tokens", e.IID)
		default:
			g.add(OK, e.IID, "%s counts %d tokens exactly", e.IID, n)
		}
	}
	r.skipUnreachable(g)
}
