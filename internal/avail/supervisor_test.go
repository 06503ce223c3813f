package avail

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// fakeCore records what the supervisor publishes into the core.
type fakeCore struct {
	mu    sync.Mutex
	roles map[string]fleet.Role
	live  map[string]bool
	sets  int          // SetLive calls
	paces []sched.Pace // what DecodePace answers
}

func (c *fakeCore) SetLive(live map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets++
	for iid, ok := range live {
		c.live[iid] = ok
	}
}

func (c *fakeCore) SetProbation(string, bool) {}

func (c *fakeCore) Snapshot() *sched.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &sched.Snapshot{}
	for iid, role := range c.roles {
		s.Engines = append(s.Engines, sched.EngineView{IID: iid, Role: role, Live: c.live[iid]})
	}
	slices.SortFunc(s.Engines, func(a, b sched.EngineView) int {
		if a.IID < b.IID {
			return -1
		}
		return 1
	})
	return s
}

func (c *fakeCore) DecodePace(float64) []sched.Pace {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]sched.Pace(nil), c.paces...)
	for i := range out {
		out[i].Live = c.live[out[i].IID]
	}
	return out
}

func (c *fakeCore) isLive(iid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[iid]
}

// fakeProbes answer every probe with the configured health error.
type fakeProbes struct{ health error }

func (p fakeProbes) Health(context.Context, string) error     { return p.health }
func (p fakeProbes) Credential(context.Context, string) error { return nil }
func (p fakeProbes) Inference(context.Context, string) error  { return p.health }
func (p fakeProbes) Stream(context.Context, string) error     { return p.health }
func (p fakeProbes) Identity(context.Context, string) (vllm.Identity, error) {
	return vllm.Identity{Version: "0.9.0", ProcessStart: 1}, nil
}
func (p fakeProbes) Attestation(context.Context, string) (string, error) { return "", nil }
func (p fakeProbes) Model(context.Context, string) error                 { return nil }
func (p fakeProbes) AttestationDigest(context.Context, string, vllm.Identity) (string, error) {
	return "", nil
}
func (p fakeProbes) Transfer(context.Context, string, string) error { return errors.New("unused") }

type fixture struct {
	s       *Supervisor
	core    *fakeCore
	changed int // StateChanged calls
	wg      sync.WaitGroup
}

// newFixture is a supervisor over p0, d0, d1 with failure_quarantine_s q.
func newFixture(t *testing.T, q float64, probes Probes) *fixture {
	t.Helper()
	return newFixtureWith(t, probes, func(cfg *fleet.Config) { cfg.Recovery.FailureQuarantineS = q })
}

// newFixtureWith is newFixture with the fleet changed by edit before the
// supervisor is built (eject_after is 1 unless edit says otherwise).
func newFixtureWith(t *testing.T, probes Probes, edit func(cfg *fleet.Config)) *fixture {
	t.Helper()
	cfg := fleet.Defaults()
	cfg.Model = "m"
	cfg.SLO = fleet.SLO{TTFT: 2, TPOT: 0.1}
	cfg.Recovery.EjectAfter = 1
	edit(&cfg)
	core := &fakeCore{roles: map[string]fleet.Role{}, live: map[string]bool{}}
	for _, e := range []fleet.Engine{{IID: "p0", Role: fleet.Prefill}, {IID: "d0", Role: fleet.Decode}, {IID: "d1", Role: fleet.Decode}} {
		cfg.Engines = append(cfg.Engines, e)
		core.roles[e.IID] = e.Role
	}
	f := &fixture{core: core}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.wg.Wait() })
	f.s = New(Config{Fleet: &cfg, Clock: ports.NewFake(time.Unix(1000, 0)), Epoch: time.Unix(1000, 0),
		Metrics: metrics.New(&cfg), Core: core, Probes: probes, Status: nil,
		StateChanged: func() { f.changed++ }, Context: ctx,
		Go: func(g func(context.Context)) { f.wg.Add(1); go func() { defer f.wg.Done(); g(ctx) }() }})
	return f
}

// verdictCase is one failed leg and what the supervisor must make of it.
type verdictCase struct {
	name       string
	quarantine float64 // recovery.failure_quarantine_s
	f          Failure
	wantLive   bool
	ejected    string // the ejection cause, "" for none
	held       bool
	changed    bool // the handoff document was signalled
}

// The supervisor is the one writer of liveness: what the core holds is
// what Usable answers, for every engine, after every verdict.
func TestLegFailedVerdictsPublishLivenessIntoTheCore(t *testing.T) {
	cases := []verdictCase{
		{"a refused connection ejects", 0, Failure{IID: "d0", Err: &fault.Error{Reason: fault.EngineConnection, Class: "connection"}}, false, "connection", false, true},
		{"a router-side pool fault is not the engine's", 0, Failure{IID: "d0", Err: &fault.Error{Reason: fault.LocalPool, Class: "connection"}}, true, "", false, false},
		{"a 4xx proves the engine up", 0, Failure{IID: "d0", Err: &fault.Error{Reason: fault.EngineRejected, Status: 400}}, true, "", false, false},
		{"a refused credential holds it out", 0, Failure{IID: "d0", Err: &fault.Error{Reason: fault.EngineRejected, Status: 401}}, false, "", true, true},
		{"a failed leg rests it when a peer covers the role", 30, Failure{IID: "d0", Err: &fault.Error{Reason: fault.EngineError, Class: "timeout"}}, false, "", false, false},
		{"the last of its role is never rested", 30, Failure{IID: "p0", Err: &fault.Error{Reason: fault.EngineError, Class: "timeout"}}, true, "", false, false},
		{"a cut at eject_after ejects when a peer covers the role", 0, Failure{IID: "d0", Peer: "p0", Tokens: 3, Err: &fault.Error{Phase: "decode", Reason: fault.InvalidResponse, Class: "stream"}}, false, "output_cut", false, true},
		{"a response limit after tokens is no cut", 0, Failure{IID: "d0", Peer: "p0", Tokens: 3, Err: &fault.Error{Phase: "decode", Reason: fault.ResponseLimit}}, true, "", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { legVerdict(t, tc) }) })
	}
}

// legVerdict is one verdictCase; the leg goroutine has applied the
// failure once synctest.Wait returns.
func legVerdict(t *testing.T, tc verdictCase) {
	fx := newFixture(t, tc.quarantine, fakeProbes{})
	fx.s.LegFailed(tc.f)
	synctest.Wait()
	iid := tc.f.IID
	if got := fx.s.Usable(iid); got != tc.wantLive {
		t.Errorf("Usable(%s) = %v, want %v", iid, got, tc.wantLive)
	}
	for _, e := range []string{"p0", "d0", "d1"} {
		if fx.core.isLive(e) != fx.s.Usable(e) {
			t.Errorf("%s: the core says live %v, the supervisor %v", e, fx.core.isLive(e), fx.s.Usable(e))
		}
	}
	if got := fx.s.View().Ejected()[iid]; got != tc.ejected {
		t.Errorf("ejection cause %q, want %q", got, tc.ejected)
	}
	if held := slices.Contains(fx.s.View().Held(), iid); held != tc.held {
		t.Errorf("held %v, want %v", held, tc.held)
	}
	if (fx.changed > 0) != tc.changed {
		t.Errorf("StateChanged called %d times, want a call: %v", fx.changed, tc.changed)
	}
}

// A failed verification probe never ejects the last live engine of its
// role; with a live peer it does.
func TestVerificationProtectsTheLastOfItsRole(t *testing.T) {
	down := &fault.Error{Reason: fault.EngineConnection, Msg: "refused"}
	fx := newFixture(t, 0, fakeProbes{health: down})
	fx.s.verify(context.Background(), "p0", false)
	if !fx.s.Usable("p0") {
		t.Error("the only prefill engine was ejected by a failed probe")
	}
	fx.s.verify(context.Background(), "d0", false)
	if fx.s.Usable("d0") || fx.s.View().Ejected()["d0"] != "connection" {
		t.Errorf("d0 failed its probe with d1 live and was not ejected: %v", fx.s.View().Ejected())
	}
	if fx.s.LiveCount() != 2 {
		t.Errorf("LiveCount %d, want 2", fx.s.LiveCount())
	}
}

// A quarantine ends at the monitor pass after its length, and the core
// learns it from the supervisor.
func TestQuarantineEndsAndTheCoreHearsIt(t *testing.T) { synctest.Test(t, quarantineEnds) }

func quarantineEnds(t *testing.T) {
	clock := ports.NewFake(time.Unix(1000, 0))
	fx := newFixture(t, 5, fakeProbes{})
	fx.s.clock = clock
	fx.s.LegFailed(Failure{IID: "d0", Err: &fault.Error{Reason: fault.EngineError, Class: "inference_status"}})
	synctest.Wait() // the leg goroutine has applied it
	if fx.core.isLive("d0") {
		t.Fatal("the core still places on the quarantined d0")
	}
	clock.Advance(6 * time.Second)
	fx.s.releaseQuarantines()
	if !fx.core.isLive("d0") || !fx.s.Usable("d0") {
		t.Errorf("d0 not back after its quarantine: core %v, supervisor %v", fx.core.isLive("d0"), fx.s.Usable("d0"))
	}
}

// A full leg queue never blocks the request and never loses the
// breaker's count: the request goroutine applies its failure itself.
func TestAFullLegQueueAppliesTheFailureInline(t *testing.T) {
	fx := newFixture(t, 0, fakeProbes{})
	fx.s.legs = make(chan Failure) // no room: the leg goroutine reads the old queue
	fx.s.LegFailed(Failure{IID: "d0", Err: &fault.Error{Reason: fault.EngineConnection, Class: "connection"}})
	if fx.s.View().Ejected()["d0"] != "connection" || fx.s.InlineLegs() != 1 {
		t.Errorf("after a failure on a full queue: ejected %v, inline %d; want d0 ejected, 1 inline", fx.s.View().Ejected(), fx.s.InlineLegs())
	}
}
