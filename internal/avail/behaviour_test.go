package avail

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/profile"
	"github.com/narwhal-go/narwhal/internal/sched"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// The supervisor's behaviour on virtual time (testing/synctest) with
// scripted probes: what a probe job decides is read after synctest.Wait,
// when every job has done all it can, never after a sleep.

// scriptProbes answer as the test scripts each engine; the test changes
// the script between passes.
type scriptProbes struct {
	mu          sync.Mutex
	down        map[string]bool // /health (and inference) fail
	version     map[string]string
	start       map[string]float64
	transferErr error
}

func newScript() *scriptProbes {
	p := &scriptProbes{down: map[string]bool{}, version: map[string]string{}, start: map[string]float64{}}
	for _, iid := range []string{"p0", "d0", "d1"} {
		p.version[iid], p.start[iid] = "0.9.0", 1
	}
	return p
}

func (p *scriptProbes) set(f func(p *scriptProbes)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *scriptProbes) fail(iid string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down[iid] {
		return &fault.Error{Reason: fault.EngineConnection, Class: "connection", Msg: "refused"}
	}
	return nil
}

func (p *scriptProbes) Health(_ context.Context, iid string) error    { return p.fail(iid) }
func (p *scriptProbes) Credential(context.Context, string) error      { return nil }
func (p *scriptProbes) Inference(_ context.Context, iid string) error { return p.fail(iid) }
func (p *scriptProbes) Stream(_ context.Context, iid string) error    { return p.fail(iid) }
func (p *scriptProbes) Identity(_ context.Context, iid string) (vllm.Identity, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return vllm.Identity{Version: p.version[iid], ProcessStart: p.start[iid]}, nil
}
func (p *scriptProbes) Attestation(context.Context, string) (string, error) { return "", nil }
func (p *scriptProbes) AttestationDigest(context.Context, string, vllm.Identity) (string, error) {
	return "", nil
}
func (p *scriptProbes) Model(context.Context, string) error { return nil }
func (p *scriptProbes) Transfer(context.Context, string, string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.transferErr
}

// passes runs n monitor passes a second apart and lets their jobs finish.
func passes(f *fixture, n int) {
	for range n {
		f.s.MonitorPass()
		time.Sleep(time.Second) // virtual: the bubble's clock
		synctest.Wait()
	}
}

// A breaker verdict is verified off the request path: a timeout-shaped
// failure ejects only if /health fails too, bad work only if a direct
// completion fails; a passing probe clears the streak.
func TestBreakerVerdictsAreVerifiedInTheBackground(t *testing.T) {
	for _, tc := range []struct {
		name    string
		class   string
		down    bool
		ejected string
	}{
		{"a timeout on a healthy engine", "timeout", false, ""},
		{"a timeout with /health down", "timeout", true, "connection"},
		{"a 5xx on an engine that still completes", "inference_status", false, ""},
		{"a 5xx and a failed completion", "inference_status", true, "connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newScript()
				f := newFixture(t, 0, p)
				p.set(func(p *scriptProbes) { p.down["d0"] = tc.down })
				f.s.LegFailed(Failure{IID: "d0", Err: &fault.Error{Reason: fault.EngineError, Class: fault.Class(tc.class)}})
				synctest.Wait() // the verification has run
				if n := f.s.Verifications(); n != 1 {
					t.Fatalf("%d verifications ran, want 1", n)
				}
				if got := f.s.View().Ejected()["d0"]; got != tc.ejected {
					t.Errorf("ejection cause %q, want %q", got, tc.ejected)
				}
				if got := f.s.Usable("d0"); got != (tc.ejected == "") {
					t.Errorf("Usable(d0) = %v", got)
				}
				if n := f.s.View().Streaks()["d0"][lifecycle.Class(tc.class)]; tc.ejected == "" && n != 0 {
					t.Errorf("streak %s = %d after a passing verification, want 0", tc.class, n)
				}
			})
		})
	}
}

// An ejected engine is probed every readmit_every passes; a row of the
// profile store bound to another process keeps it out (and says so in
// the lifecycle events) until the store has its new row.
func TestReadmissionWaitsForItsCadenceAndItsProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newScript()
		f := newFixtureWith(t, p, func(cfg *fleet.Config) { cfg.Recovery.ReadmitEvery, cfg.Recovery.LivenessEvery = 3, 0 })
		stale, _ := profile.Generation("0.9.0", 0.5, "")
		live, _ := profile.Generation("0.9.0", 1, "")
		f.s.SetGenerations(map[string]string{"d0": stale})
		f.s.eject("d0", "connection", false)
		passes(f, 2)
		if f.s.Usable("d0") {
			t.Fatal("d0 readmitted before its readmission probe was due")
		}
		passes(f, 1)
		if f.s.Usable("d0") || !hasEvent(f.s.View().Events(), "profile_recovery_blocked", "d0") {
			t.Fatalf("d0 readmitted on a stale profile row (events %v)", f.s.View().Events())
		}
		f.s.SetGenerations(map[string]string{"d0": live}) // re-profiled
		passes(f, 2)
		if f.s.Usable("d0") {
			t.Fatal("d0 readmitted between probes")
		}
		passes(f, 1)
		if !f.s.Usable("d0") || len(f.s.View().Ejected()) != 0 {
			t.Errorf("d0 not readmitted with its new row: ejected %v", f.s.View().Ejected())
		}
	})
}

func hasEvent(evs []lifecycle.Event, action, iid string) bool {
	return slices.ContainsFunc(evs, func(e lifecycle.Event) bool { return e.Action == action && e.Fields["iid"] == iid })
}

// The liveness sweep finds an engine restarted as another build: it is
// excluded and held as incompatible-build, and comes back only once it
// runs the fleet's build again.
func TestLivenessSweepHoldsAnotherBuildUntilItIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newScript()
		f := newFixtureWith(t, p, func(cfg *fleet.Config) { cfg.Recovery.ReadmitEvery, cfg.Recovery.LivenessEvery = 2, 1 })
		f.s.CaptureIdentities(context.Background())
		p.set(func(p *scriptProbes) { p.version["d1"], p.start["d1"] = "0.10.0", 2 })
		passes(f, 1)
		held := slices.ContainsFunc(f.s.View().Holds(), func(h lifecycle.Hold) bool {
			return h.IID == "d1" && h.Cause == lifecycle.HoldIncompatibleBuild
		})
		if f.s.Usable("d1") || !held {
			t.Fatalf("d1 on another build: usable %v, holds %v", f.s.Usable("d1"), f.s.View().Holds())
		}
		passes(f, 4)
		if f.s.Usable("d1") {
			t.Fatal("d1 back while it still runs another build")
		}
		p.set(func(p *scriptProbes) { p.version["d1"], p.start["d1"] = "0.9.0", 3 })
		passes(f, 4)
		if !f.s.Usable("d1") || len(f.s.View().Holds()) != 0 {
			t.Errorf("d1 back on the fleet's build: usable %v, holds %v, ejected %v", f.s.Usable("d1"), f.s.View().Holds(), f.s.View().Ejected())
		}
	})
}

// Under engine_restart_policy whole_wave an ejection holds the fleet;
// POST readmit {"wave": true} lifts it only when every engine passes
// every gate (here: a KV transfer that fails, then works).
func TestWholeWaveHoldLiftsOnlyWhenEveryEngineValidates(t *testing.T) {
	p := newScript()
	f := newFixtureWith(t, p, func(cfg *fleet.Config) {
		cfg.Recovery.EngineRestartPolicy = fleet.RestartWholeWave
		cfg.EngineContract = &fleet.EngineContract{}
	})
	var status int
	f.s.reply = func(_ http.ResponseWriter, st int, _ any) { status = st }
	f.s.status = fixedStatus{}
	f.s.eject("d0", "connection", false)
	if f.s.WaveBlocked() == "" {
		t.Fatal("an ejection under whole_wave did not hold the fleet")
	}
	readmit := func() {
		f.s.ServeReadmit(httptest.NewRecorder(), httptest.NewRequest("POST", "/narwhal/lifecycle/readmit", strings.NewReader(`{"wave":true}`)))
	}
	p.set(func(p *scriptProbes) { p.transferErr = errors.New("no KV moved") })
	readmit()
	if status != http.StatusConflict || f.s.WaveBlocked() == "" || f.s.Usable("d0") {
		t.Fatalf("wave readmitted with a failing KV transfer: %d, blocked %q", status, f.s.WaveBlocked())
	}
	p.set(func(p *scriptProbes) { p.transferErr = nil })
	readmit()
	if status != http.StatusOK || f.s.WaveBlocked() != "" || !f.s.Usable("d0") {
		t.Errorf("wave not readmitted with every gate passing: %d, blocked %q", status, f.s.WaveBlocked())
	}
}

// A drifting engine goes on probation, then is evicted when a peer
// covers its role; the last of its role stays, on probation.
func TestDriftEvictsOnlyACoveredEngine(t *testing.T) {
	f := newFixtureWith(t, newScript(), func(cfg *fleet.Config) {
		cfg.Recovery.Health = fleet.Health{WindowS: 1, DriftBand: 2, MinSamples: 1, ProbationWindows: 1, EvictWindows: 2, RecoveryWindows: 1}
	})
	slow := func(iid string, r float64) sched.Pace {
		return sched.Pace{IID: iid, Resident: 1, Gaps: 1, MeanGap: r, Expected: 1}
	}
	f.core.mu.Lock()
	f.core.paces = []sched.Pace{slow("p0", 5), slow("d0", 5), slow("d1", 1)}
	f.core.mu.Unlock()
	clock := f.s.clock.(interface{ Advance(time.Duration) })
	for range 3 { // opens the window, then closes two
		f.s.DriftPass()
		clock.Advance(time.Second)
	}
	if got := f.s.View().Ejected()["d0"]; got != "drift" {
		t.Errorf("d0 ejected %q after two drifting windows, want drift", got)
	}
	if !f.s.Usable("p0") || !slices.Contains(f.s.Probation(), "p0") {
		t.Errorf("p0, the only prefill engine: usable %v, probation %v", f.s.Usable("p0"), f.s.Probation())
	}
	if !f.s.Usable("d1") || slices.Contains(f.s.Probation(), "d1") {
		t.Errorf("d1 keeps pace: usable %v, probation %v", f.s.Usable("d1"), f.s.Probation())
	}
}
