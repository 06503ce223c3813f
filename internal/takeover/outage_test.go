package takeover

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/etcdlease"
	"github.com/narwhal-go/narwhal/internal/etcdlease/etcdtest"
	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
	"github.com/narwhal-go/narwhal/internal/state/leasetest"
)

// Lease timing of the outage tests: short, so a round is mostly outage.
const (
	outTTL    = 2 * time.Second
	outRenew  = 500 * time.Millisecond
	outMargin = 500 * time.Millisecond
)

// outageRounds is NARWHAL_OUTAGE_ROUNDS (default 1; `make ha-outage`
// runs 5) and outageFor NARWHAL_OUTAGE_S (default 30).
func outageRounds(t *testing.T) (int, time.Duration) {
	rounds, secs := 1, 30
	for name, p := range map[string]*int{"NARWHAL_OUTAGE_ROUNDS": &rounds, "NARWHAL_OUTAGE_S": &secs} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive whole number", name, v)
			}
			*p = n
		}
	}
	return rounds, time.Duration(secs) * time.Second
}

// outageBackend is a lease store that can be taken away from every router
// at once (etcd stopped, the lease's lock file unusable) and brought back.
type outageBackend struct {
	open        func() state.LeaseStore // one router's client
	stop, start func()
}

func etcdBackend(t *testing.T) outageBackend {
	srv := etcdtest.Start(t)
	return outageBackend{
		open: func() state.LeaseStore {
			s, err := etcdlease.Open([]string{srv.Endpoint()}, "/test/outage")
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		stop: srv.Stop, start: srv.Start,
	}
}

// fileBackend's outage puts a directory where the lock file goes: every
// open of <path>.lock then fails (for root too, unlike a chmod), and the
// lease file itself, epoch included, is left as it was.
func fileBackend(t *testing.T) outageBackend {
	path := filepath.Join(t.TempDir(), "lease.json")
	return outageBackend{
		open: func() state.LeaseStore { return state.FileStore(path) },
		stop: func() {
			if err := os.Remove(path + ".lock"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path+".lock", 0o755); err != nil {
				t.Fatal(err)
			}
		},
		start: func() {
			if err := os.Remove(path + ".lock"); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// outageRouter is one router on the backend, on the real clock; its
// store can also be cut off alone (a partitioned primary).
type outageRouter struct {
	h   *HA
	cut *leasetest.Outage
}

func newOutageRouter(t *testing.T, b outageBackend, id string, seed uint64, standbyOf string) outageRouter {
	t.Helper()
	cut := &leasetest.Outage{LeaseStore: b.open()}
	l, err := state.NewLeaseOn(cut, id, outTTL, outRenew, outMargin, ports.SystemClock(), ports.SeededIDs(seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() }) // after the router's loops stop (cleanups run last first)
	rt := newFakeRouter(t)
	rt.snap = testSnapshot()
	h := newTestHA(t, rt, func(c *Config) {
		c.Clock, c.Lease, c.StandbyOf, c.Rng = ports.SystemClock(), l, standbyOf, ports.NewSeededRng(seed)
	})
	return outageRouter{h: h, cut: cut}
}

// serving is what /ready reads first: nothing stops it placing work.
func (r outageRouter) serving() bool { return r.h.NotControlling() == "" }

// primaryServer is the primary's /ready and /narwhal/handoff as a
// standby probes them.
func primaryServer(t *testing.T, h *HA) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if h.NotControlling() != "" {
			w.WriteHeader(503)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ready","control_ready":true}`))
	})
	mux.HandleFunc("GET /narwhal/handoff", func(w http.ResponseWriter, _ *http.Request) {
		b, err := state.Encode(h.Handoff())
		if err != nil {
			w.WriteHeader(500)
			return
		}
		_, _ = w.Write(b)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// waitFor polls cond on the real clock for up to d, failing the test
// if two routers ever serve at once.
func waitFor(t *testing.T, d time.Duration, what string, routers []outageRouter, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		n := 0
		for _, r := range routers {
			if r.serving() {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%d routers serve at once while waiting for %s", n, what)
		}
		if cond() {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var why []string
	for _, r := range routers {
		why = append(why, r.h.NotControlling())
	}
	t.Fatalf("no %s within %v; routers say %q", what, d, why)
	return 0
}

func anyServing(routers []outageRouter) func() bool {
	return func() bool { return slices.ContainsFunc(routers, outageRouter.serving) }
}

// loneRouter is one router on the backend, serving.
func loneRouter(t *testing.T, b outageBackend) []outageRouter {
	a := newOutageRouter(t, b, "a", 1, "")
	a.h.Start()
	rs := []outageRouter{a}
	waitFor(t, 2*outTTL, "the claim at start", rs, anyServing(rs))
	return rs
}

// failedOverPair is a primary A cut off from the store long enough for
// its standby B to take over, then reconnected: B serves, A is fenced
// (the lease is held elsewhere) and keeps claiming.
func failedOverPair(t *testing.T, b outageBackend) []outageRouter {
	a := newOutageRouter(t, b, "a", 1, "")
	a.h.Start()
	waitFor(t, 2*outTTL, "the primary's claim", []outageRouter{a}, a.serving)
	sb := newOutageRouter(t, b, "b", 2, primaryServer(t, a.h))
	sb.h.Start()
	rs := []outageRouter{a, sb}
	waitFor(t, 2*outTTL, "the standby's first good probe", rs, func() bool {
		f := sb.h.follower.Load()
		return f != nil && f.LastMiss() == "" && f.FailoverBlocked() == ""
	})
	a.cut.Down.Store(true)
	waitFor(t, 4*outTTL, "the failover", rs, sb.serving)
	a.cut.Down.Store(false)
	waitFor(t, 4*outTTL, "the old primary to see the lease held", rs, func() bool {
		return a.h.Blocked() == "lease renewal failed; lease held by another router; retrying"
	})
	return rs
}

// A store outage longer than the lease ttl leaves every router fenced
// and saying why; once the store is back a router serves again within
// two lease periods, at a larger epoch: a lone router, and a pair whose
// old primary was left fenced by a failover.
func TestLeaseOutageRecovery(t *testing.T) {
	rounds, outage := outageRounds(t)
	cases := []struct {
		name     string
		backend  func(*testing.T) outageBackend
		topology func(*testing.T, outageBackend) []outageRouter
	}{
		{"etcd/lone", etcdBackend, loneRouter},
		{"etcd/pair", etcdBackend, failedOverPair},
		{"file/lone", fileBackend, loneRouter},
		{"file/pair", fileBackend, failedOverPair},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.backend(t)
			rs := tc.topology(t, b)
			var took []time.Duration
			for round := 1; round <= rounds; round++ {
				took = append(took, outageRound(t, b, rs, outage))
				t.Logf("round %d: serving %v after the store came back", round, took[round-1])
			}
			slices.Sort(took)
			t.Logf("%s: recovery over %d rounds: median %v, max %v", tc.name, rounds, took[len(took)/2], took[len(took)-1])
		})
	}
}

// outageRound takes the store away for outage and returns how long after
// it came back a router served.
func outageRound(t *testing.T, b outageBackend, rs []outageRouter, outage time.Duration) time.Duration {
	t.Helper()
	epoch := 0
	for _, r := range rs {
		epoch = max(epoch, r.h.cfg.Lease.Epoch())
	}
	b.stop()
	// A renewal hung on the store fences by the clock ("lease expired")
	// until it fails, at most ttl − margin later; from then on the fence
	// says why.
	waitFor(t, 2*outTTL, "fencing with a reason", rs, func() bool {
		return !slices.ContainsFunc(rs, func(r outageRouter) bool { return r.h.Blocked() == "" })
	})
	deadline := time.Now().Add(outage)
	for time.Now().Before(deadline) {
		for _, r := range rs {
			if r.serving() || r.h.Blocked() == "" || !r.h.Fenced() {
				t.Fatalf("during the outage: serving %v, blocked %q, fenced %v", r.serving(), r.h.Blocked(), r.h.Fenced())
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.start()
	took := waitFor(t, 2*outTTL, "router serving after the store came back", rs, anyServing(rs))
	for _, r := range rs {
		if r.serving() && r.h.cfg.Lease.Epoch() <= epoch {
			t.Errorf("serving at epoch %d, want past %d", r.h.cfg.Lease.Epoch(), epoch)
		}
	}
	return took
}
