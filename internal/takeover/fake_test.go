package takeover

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/lifecycle"
	"github.com/narwhal-go/narwhal/internal/metrics"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Unix(1790000000, 0)

// fakeRouter is the Router side of a test: a fixed snapshot, and a record
// of everything applied to it.
type fakeRouter struct {
	now  float64
	snap Snapshot
	slo  func(*journal.RequestRow) bool

	mu         sync.Mutex // guards applied, late, identified
	applied    []Restored
	late       []Late
	identified int
	onIdentify func(n int) // nil: nothing; called outside mu with the count so far

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

func newFakeRouter(t *testing.T) *fakeRouter {
	f := &fakeRouter{slo: func(*journal.RequestRow) bool { return false }}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { f.cancel(); f.bg.Wait() })
	return f
}

func (f *fakeRouter) Now() float64                        { return f.now }
func (f *fakeRouter) Snapshot() Snapshot                  { return f.snap }
func (f *fakeRouter) SLOMet(row *journal.RequestRow) bool { return f.slo(row) }

func (f *fakeRouter) Apply(x Restored) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, x)
}

func (f *fakeRouter) AddLate(l Late) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.late = append(f.late, l)
}

func (f *fakeRouter) Identify(context.Context) {
	f.mu.Lock()
	f.identified++
	n, hook := f.identified, f.onIdentify
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
}

func (f *fakeRouter) identifiedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.identified
}

func (f *fakeRouter) Background(fn func(ctx context.Context)) {
	f.bg.Add(1)
	go func() {
		defer f.bg.Done()
		fn(f.ctx)
	}()
}

func (f *fakeRouter) lastApplied(t *testing.T) Restored {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applied) == 0 {
		t.Fatal("nothing was applied to the router")
	}
	return f.applied[len(f.applied)-1]
}

// testFleet has a pinned prefill p0, a prefill p1 and a decode d0.
func testFleet(t *testing.T) *fleet.Config {
	t.Helper()
	cfg := fleet.Defaults()
	cfg.Model = "sim-model"
	cfg.SLO = fleet.SLO{TTFT: 1, TPOT: 0.1}
	for _, e := range []fleet.Engine{{IID: "p0", Role: fleet.Prefill, Pin: true}, {IID: "p1", Role: fleet.Prefill}, {IID: "d0", Role: fleet.Decode}} {
		e.URL = "http://127.0.0.1:1"
		cfg.Engines = append(cfg.Engines, e)
	}
	if err := cfg.Validate("test"); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// newTestHA is an HA for testFleet with a state file in a temp dir;
// mod adjusts its configuration first.
func newTestHA(t *testing.T, rt Router, mod func(*Config)) *HA {
	t.Helper()
	cfg := testFleet(t)
	c := Config{StatePath: filepath.Join(t.TempDir(), "state.json"), Fleet: cfg, Engines: []string{"d0", "p0", "p1"},
		Clock: ports.NewFake(t0), Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(cfg), Life: lifecycle.New(cfg)}
	if mod != nil {
		mod(&c)
	}
	h, err := New(c, rt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func testLease(t *testing.T, path, id string, clk ports.Clock, seed uint64) *state.Lease {
	t.Helper()
	l, err := state.NewLease(path, id, 5*time.Second, time.Second, time.Second, clk, ports.SeededIDs(seed))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// eventually polls cond for up to five seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, 10*time.Millisecond, what, cond)
}
