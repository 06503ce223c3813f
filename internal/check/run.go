package check

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/narwhal-go/narwhal/internal/attest"
	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/probe"
	"github.com/narwhal-go/narwhal/internal/units"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// run is one preflight's state: what each gate learned about each engine.
type run struct {
	o      Options
	cfg    *fleet.Config
	probes *probe.Prober

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
	return &run{o: o, cfg: o.Fleet, probes: probe.New(o.Fleet, probe.Options{APIKey: o.APIKey, Sidecars: o.Sidecars, IDs: o.IDs}),
		live: map[string]bool{}, identity: map[string]vllm.Identity{}, attested: map[string]*attest.Payload{},
		incompatible: map[string]string{}, slow: map[string]bool{}, handoffs: map[string]bool{},
		kvOK: map[string]bool{}, kvFail: map[string]bool{}, kvTried: map[string]bool{}}
}

func (r *run) close() { r.probes.Close() }

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
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
		if err := r.probes.Health(ctx, e.IID); err != nil {
			g.add(Fail, e.IID, "%s /health did not answer 200: %s", e.IID, fault.Detail(err))
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
	id, err := r.probes.Identity(ctx, e.IID)
	if err != nil {
		g.add(Fail, e.IID, "%s", probe.IdentityUnreadable(e.IID, err))
		r.incompatible[e.IID] = "identity unreadable"
		return vllm.Identity{}, false
	}
	r.identity[e.IID] = id
	return id, true
}

func (r *run) attestEngine(ctx context.Context, g *Gate, e fleet.Engine, k *fleet.EngineContract, id vllm.Identity) {
	fail := func(msg string) {
		g.add(Fail, e.IID, "%s", msg)
		r.incompatible[e.IID] = "contract"
	}
	if !vllm.SameBuild(id.Version, k.VLLMVersion) {
		fail(fmt.Sprintf("%s runs vLLM %s, engine_contract.vllm_version is %s", e.IID, id.Version, k.VLLMVersion))
		return
	}
	p, err := r.probes.Attest(ctx, e.IID, id, k)
	var ae *probe.AttestError
	switch {
	case errors.As(err, &ae) && ae.Stage == probe.StageVerify:
		for _, f := range ae.Fails {
			fail(e.IID + " attestation: " + f) // one line per failed field
		}
		return
	case err != nil:
		fail(err.Error())
		return
	}
	r.attested[e.IID] = p
	g.add(OK, e.IID, "%s contract %s attested for process %.6f", e.IID, k.Fingerprint(), id.ProcessStart)
}

func (r *run) model(ctx context.Context, g *Gate) {
	for _, e := range r.liveEngines() {
		if err := r.probes.ServedModel(ctx, e.IID); err != nil {
			g.add(Fail, e.IID, "%s", err)
			r.incompatible[e.IID] = "model"
			continue
		}
		g.add(OK, e.IID, "%s serves %s", e.IID, r.cfg.Model)
	}
	r.skipUnreachable(g)
}

func (r *run) tokenize(ctx context.Context, g *Gate) {
	if !r.cfg.Engine.Tokenize {
		g.add(Skip, "", "engine.tokenize is false: the router estimates tokens from characters")
		return
	}
	body := mustJSON(map[string]any{"model": r.cfg.Model, "prompt": words(r.o.ProbeWords)})
	for _, e := range r.liveEngines() {
		c, cancel := context.WithTimeout(ctx, units.Seconds(r.cfg.Engine.TokenizeTimeoutS))
		n, err := r.probes.Client(e.IID).Tokenize(c, body)
		cancel()
		switch {
		case err != nil:
			g.add(Fail, e.IID, "%s /tokenize: %s (a character estimate's error is squared by the quadratic prefill model)", e.IID, fault.Detail(err))
		case n == 0:
			g.add(Fail, e.IID, "%s /tokenize counted 0 tokens", e.IID)
		default:
			g.add(OK, e.IID, "%s counts %d tokens exactly", e.IID, n)
		}
	}
	r.skipUnreachable(g)
}
