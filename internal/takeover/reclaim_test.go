package takeover

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

// Lease timing of the reclaim tests (testLease's): ttl 5 s, renew 1 s,
// margin 1 s.
const leaseTTL = 5 * time.Second

// outageLease is a file lease whose store can be taken down.
func outageLease(t *testing.T, path, id string, clk ports.Clock, seed uint64) (*state.Lease, *leasetest.Outage) {
	t.Helper()
	o := &leasetest.Outage{LeaseStore: state.FileStore(path)}
	l, err := state.NewLeaseOn(o, id, leaseTTL, time.Second, time.Second, clk, ports.SeededIDs(seed))
	if err != nil {
		t.Fatal(err)
	}
	return l, o
}

// step moves the fake clock from one parked timer to the next (so time
// never outruns the lease loop, however slow the machine) until done
// holds, calling each before every move, or fails after limit of fake
// time. It returns the fake time done first held at.
func step(t *testing.T, clk *ports.Fake, limit time.Duration, done func() bool, each func()) time.Time {
	t.Helper()
	end, wall := clk.Now().Add(limit), time.Now().Add(20*time.Second)
	for time.Now().Before(wall) {
		if done() {
			return clk.Now()
		}
		if clk.Pending() == 0 {
			time.Sleep(time.Millisecond) // the loop is between timers
			continue
		}
		if done() {
			return clk.Now()
		}
		next, _ := clk.NextDeadline()
		if next.After(end) {
			// Only timers past the limit wait (a takeover's closing of
			// the old run's requests): the loop is busy, or done never
			// comes; the wall-clock bound below tells which.
			time.Sleep(time.Millisecond)
			continue
		}
		if each != nil {
			each()
		}
		clk.Set(next)
	}
	t.Fatalf("not within %v of fake time (at %v), or the lease loop stopped parking on the clock", limit, clk.Now().Sub(end)+limit)
	return time.Time{}
}

// runFor steps the clock like step for d of fake time, calling each
// before every move.
func runFor(t *testing.T, clk *ports.Fake, d time.Duration, each func()) {
	t.Helper()
	end := clk.Now().Add(d)
	step(t, clk, d+leaseTTL, func() bool {
		if next, ok := clk.NextDeadline(); ok && next.After(end) {
			clk.Set(end)
		}
		return !clk.Now().Before(end)
	}, each)
}

func blockedIs(h *HA, want string) func() bool { return func() bool { return h.Blocked() == want } }

// A lone router whose store goes away fences on its next renewal, says
// why for the whole outage, and once the store is back claims again
// within two lease periods at a new epoch, re-identifies its engines and
// writes its handoff document under that epoch.
func TestFencedRouterClaimsAgainWhenTheStoreIsBack(t *testing.T) {
	clk := ports.NewFake(t0)
	l, o := outageLease(t, filepath.Join(t.TempDir(), "lease.json"), "a", clk, 1)
	rt := newFakeRouter(t)
	rt.snap = testSnapshot()
	var spath string
	h := newTestHA(t, rt, func(c *Config) { c.Clock, c.Lease, spath = clk, l, c.StatePath })
	h.Start()
	if h.Blocked() != "" || !h.Controls() || l.Epoch() != 1 {
		t.Fatalf("after start: blocked %q, controls %v, epoch %d", h.Blocked(), h.Controls(), l.Epoch())
	}
	o.Down.Store(true)
	step(t, clk, 2*time.Second, blockedIs(h, "lease renewal failed; retrying"), nil)
	runFor(t, clk, 30*time.Second, func() {
		if h.Blocked() != "lease renewal failed; retrying" || !h.Fenced() || h.Controls() {
			t.Fatalf("during the outage: blocked %q, fenced %v, controls %v", h.Blocked(), h.Fenced(), h.Controls())
		}
	})
	o.Down.Store(false)
	back := clk.Now()
	at := step(t, clk, 2*leaseTTL, blockedIs(h, ""), nil)
	t.Logf("claimed again %v after the store came back", at.Sub(back))
	if !h.Controls() || h.Fenced() || l.Epoch() != 2 {
		t.Errorf("after the reclaim: controls %v, fenced %v, epoch %d (want 2)", h.Controls(), h.Fenced(), l.Epoch())
	}
	var m dto.Metric
	if err := h.cfg.Metrics.LeaseReacquired.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		n := m.GetCounter().GetValue()
		t.Errorf("narwhal_lease_reacquired_total = %v, want 1", n)
	}
	eventually(t, "the identity check and the handoff under epoch 2", func() bool {
		rt.mu.Lock()
		ids := rt.identified
		rt.mu.Unlock()
		doc, err := state.Read(spath)
		return ids == 1 && err == nil && doc.Epoch == 2
	})
}

// A primary fenced while a standby took over stays fenced (the lease is
// held elsewhere) and keeps claiming; when the new primary stops renewing
// the old one takes the lease at the next epoch.
func TestOldPrimaryWaitsForTheNewOneThenTakesTheLease(t *testing.T) {
	clk := ports.NewFake(t0)
	path := filepath.Join(t.TempDir(), "lease.json")
	l, o := outageLease(t, path, "a", clk, 1)
	h := newTestHA(t, newFakeRouter(t), func(c *Config) { c.Clock, c.Lease = clk, l })
	h.Start()
	o.Down.Store(true) // A is cut off from the lease store
	step(t, clk, 2*time.Second, blockedIs(h, "lease renewal failed; retrying"), nil)
	b := testLease(t, path, "b", clk, 2)
	step(t, clk, 2*leaseTTL, func() bool { _, err := b.Claim(); return err == nil }, nil) // the standby takes over
	if b.Epoch() != 2 {
		t.Fatalf("the standby took epoch %d, want 2", b.Epoch())
	}
	o.Down.Store(false)
	const held = "lease renewal failed; lease held by another router; retrying"
	step(t, clk, 2*leaseTTL, blockedIs(h, held), func() { mustRenew(t, b) })
	runFor(t, clk, 30*time.Second, func() {
		mustRenew(t, b)
		if h.Blocked() != held || h.Controls() {
			t.Fatalf("while B holds the lease: blocked %q, controls %v", h.Blocked(), h.Controls())
		}
	})
	mustRenew(t, b)
	died := clk.Now() // B stops renewing: its lease runs out at died + ttl
	at := step(t, clk, leaseTTL+2*leaseTTL, blockedIs(h, ""), nil)
	t.Logf("claimed %v after the new primary's last renewal", at.Sub(died))
	if at.Sub(died) < leaseTTL {
		t.Errorf("A claimed %v after B's last renewal, before B's lease (ttl %v) ran out", at.Sub(died), leaseTTL)
	}
	if !h.Controls() || l.Epoch() != 3 {
		t.Errorf("after the new primary died: controls %v, epoch %d (want 3)", h.Controls(), l.Epoch())
	}
	if err := b.Renew(); err == nil || !strings.Contains(err.Error(), "another router took over") {
		t.Errorf("the dead primary's renewal = %v, want refused", err)
	}
}

func mustRenew(t *testing.T, l *state.Lease) {
	t.Helper()
	if err := l.Renew(); err != nil {
		t.Fatalf("B's renewal: %v", err)
	}
}

// The fence reason while a router claims again.
func TestRetryingReasons(t *testing.T) {
	held := &state.HeldError{Path: "l", Holder: "b:x", Epoch: 2}
	cases := []struct {
		cause string
		err   error
		want  string
	}{
		{"", held, "lease held by another router"},
		{"", errors.New("etcd down"), "lease unavailable: etcd down"},
		{causeRenewal, nil, "lease renewal failed; retrying"},
		{causeRenewal, errors.New("etcd down"), "lease renewal failed; retrying"},
		{causeRenewal, held, "lease renewal failed; lease held by another router; retrying"},
		{causeExpired, nil, "lease expired during takeover; retrying"},
	}
	for _, tc := range cases {
		if got := retrying(tc.cause, tc.err); got != tc.want {
			t.Errorf("retrying(%q, %v) = %q, want %q", tc.cause, tc.err, got, tc.want)
		}
	}
}

// The claim pacing starts near the renew interval, doubles, stays within
// ttl − margin, and is jittered.
func TestReclaimBackoff(t *testing.T) {
	b := &backoff{d: time.Second, max: 4 * time.Second, rng: ports.NewSeededRng(1)}
	seen := map[time.Duration]bool{}
	for i, hi := range []time.Duration{1, 2, 4, 4, 4, 4, 4, 4} {
		hi *= time.Second
		d := b.next()
		if d < hi/2 || d > hi {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, d, hi/2, hi)
		}
		seen[d] = true
	}
	if len(seen) < 6 {
		t.Errorf("%d distinct waits of 8: no jitter", len(seen))
	}
}

// primaryStub answers a standby's probes: /ready in control, and the
// handoff document body.
func primaryStub(t *testing.T, body func() []byte) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ready","control_ready":true}`))
	})
	mux.HandleFunc("GET /narwhal/handoff", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body()) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A standby that stops following (the primary runs a newer build) is not
// fenced for good: it follows nobody, says why, claims the lease once the
// primary lets it go, and then controls the fleet.
func TestStoppedStandbyClaimsTheFreedLease(t *testing.T) {
	clk := ports.NewFake(t0)
	path := filepath.Join(t.TempDir(), "lease.json")
	primary := testLease(t, path, "a", clk, 1)
	if _, err := primary.Claim(); err != nil {
		t.Fatal(err)
	}
	newer := []byte(`{"schema":"narwhal.handoff","schema_version":2}`)
	url := primaryStub(t, func() []byte { return newer })
	rt := newFakeRouter(t)
	rt.snap = testSnapshot()
	h := newTestHA(t, rt, func(c *Config) { c.Clock, c.Lease, c.StandbyOf = clk, testLease(t, path, "b", clk, 2), url })
	h.Start()
	stopped := func() bool {
		return strings.HasPrefix(h.Blocked(), "standby stopped: ") && strings.HasSuffix(h.Blocked(), "; lease held by another router; retrying")
	}
	step(t, clk, 2*leaseTTL, stopped, func() { mustRenew(t, primary) })
	if h.Controls() || h.Standby() {
		t.Fatalf("a stopped standby: controls %v, standby %v", h.Controls(), h.Standby())
	}
	if err := primary.Release(); err != nil {
		t.Fatal(err)
	}
	step(t, clk, 2*leaseTTL, blockedIs(h, ""), nil)
	if !h.Controls() || h.cfg.Lease.Epoch() != 2 || rt.identifiedCount() != 1 {
		t.Errorf("after the claim: controls %v, epoch %d (want 2), identity checks %d (want 1)",
			h.Controls(), h.cfg.Lease.Epoch(), rt.identifiedCount())
	}
}

// A standby whose lease lapses while it takes over (here: the identity
// check outlasts ttl − margin) claims again with the document already
// applied, instead of staying fenced, and controls at the next epoch.
func TestTakeoverWhoseLeaseLapsedClaimsAgain(t *testing.T) {
	clk := ports.NewFake(t0)
	path := filepath.Join(t.TempDir(), "lease.json")
	prt := newFakeRouter(t)
	prt.snap = testSnapshot()
	primary := newTestHA(t, prt, func(c *Config) { c.Clock, c.Lease = clk, testLease(t, path, "a", clk, 1) })
	if _, err := primary.cfg.Lease.Claim(); err != nil {
		t.Fatal(err)
	}
	body, err := state.Encode(primary.Handoff())
	if err != nil {
		t.Fatal(err)
	}
	var silent atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if silent.Load() {
			w.WriteHeader(503)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ready","control_ready":true}`))
	})
	mux.HandleFunc("GET /narwhal/handoff", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	rt := newFakeRouter(t)
	rt.snap = testSnapshot()
	var spath string
	h := newTestHA(t, rt, func(c *Config) {
		c.Clock, c.Lease, c.StandbyOf, spath = clk, testLease(t, path, "b", clk, 2), srv.URL, c.StatePath
	})
	rt.onIdentify = func(n int) {
		if n == 1 { // the takeover's identity check takes past ttl − margin
			clk.Advance(leaseTTL)
		}
	}
	h.Start()
	step(t, clk, 2*leaseTTL, func() bool { _, err := state.Read(spath); return err == nil }, nil) // a good probe
	silent.Store(true)
	step(t, clk, 4*leaseTTL, blockedIs(h, "lease expired during takeover; retrying"), nil)
	step(t, clk, 2*leaseTTL, func() bool { return rt.identifiedCount() == 2 && h.Blocked() == "" }, nil)
	if !h.Controls() || h.Standby() || h.cfg.Lease.Epoch() != 3 {
		t.Errorf("after the second claim: controls %v, standby %v, epoch %d (want 3)", h.Controls(), h.Standby(), h.cfg.Lease.Epoch())
	}
	if got := rt.lastApplied(t); got.Counters != prt.snap.Counters {
		t.Errorf("applied %+v, want the primary's counters", got)
	}
}
