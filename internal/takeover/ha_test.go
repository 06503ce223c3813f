package takeover

import (
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
)

func TestStandbyNeedsALease(t *testing.T) {
	_, err := New(Config{StandbyOf: "http://127.0.0.1:1"}, newFakeRouter(t))
	if err == nil || !strings.Contains(err.Error(), "a standby needs a lease: pass --lease-path with --standby-of") {
		t.Fatalf("standby without a lease: %v", err)
	}
}

// What the router's gates and /health read from its HA state.
func TestControlStates(t *testing.T) {
	cases := []struct {
		name           string
		setup          func(t *testing.T, c *Config, h **HA)
		controls       bool
		notControlling string
		fenced         bool
	}{
		{"no lease", nil, true, "", false},
		{"fenced", func(t *testing.T, c *Config, h **HA) { (*h).Fence("lease renewal failed") }, true, "lease renewal failed", true},
		{"fence lifted", func(t *testing.T, c *Config, h **HA) { (*h).Fence("x"); (*h).Fence("") }, true, "", false},
		{"standby", func(t *testing.T, c *Config, h **HA) { (*h).standby.Store(true) }, false, "shadowing", false},
		{"lease held", func(t *testing.T, c *Config, h **HA) {
			if _, err := c.Lease.Claim(); err != nil {
				t.Fatal(err)
			}
		}, true, "", false},
		{"lease expired", func(t *testing.T, c *Config, h **HA) {
			if _, err := c.Lease.Claim(); err != nil {
				t.Fatal(err)
			}
			c.Clock.(*ports.Fake).Advance(4 * time.Second) // past ttl − margin
		}, false, "lease expired", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := ports.NewFake(t0)
			var cfg Config
			h := newTestHA(t, newFakeRouter(t), func(c *Config) {
				c.Clock = clk
				if strings.HasPrefix(tc.name, "lease") {
					c.Lease = testLease(t, filepath.Join(t.TempDir(), "lease.json"), "a", clk, 1)
				}
				cfg = *c
			})
			if tc.setup != nil {
				tc.setup(t, &cfg, &h)
			}
			if h.Controls() != tc.controls || h.NotControlling() != tc.notControlling || h.Fenced() != tc.fenced {
				t.Errorf("controls %v, not controlling %q, fenced %v; want %v %q %v",
					h.Controls(), h.NotControlling(), h.Fenced(), tc.controls, tc.notControlling, tc.fenced)
			}
		})
	}
}

// A router that finds the lease held stays fenced and retries every
// second; once the holder releases it, it claims, unfences and renews.
func TestReclaimTakesAReleasedLease(t *testing.T) {
	clk := ports.NewFake(t0)
	path := filepath.Join(t.TempDir(), "lease.json")
	other := testLease(t, path, "other", clk, 2)
	if _, err := other.Claim(); err != nil {
		t.Fatal(err)
	}
	rt := newFakeRouter(t)
	h := newTestHA(t, rt, func(c *Config) { c.Clock, c.Lease = clk, testLease(t, path, "a", clk, 1) })
	h.Start()
	if h.NotControlling() != "lease held by another router" || !h.Fenced() {
		t.Fatalf("held lease: not controlling %q, fenced %v", h.NotControlling(), h.Fenced())
	}
	if err := other.Release(); err != nil {
		t.Fatal(err)
	}
	// Time moves only until the reclaim is seen: moving it on after that
	// would outrun the renewals on a loaded machine and let the new
	// lease lapse before the checks below.
	eventually(t, "the reclaim", func() bool {
		if h.Blocked() == "" {
			return true
		}
		clk.Advance(time.Second)
		return false
	})
	if !h.Controls() || h.NotControlling() != "" {
		t.Errorf("after reclaim: controls %v, not controlling %q", h.Controls(), h.NotControlling())
	}
	if epoch, holder := h.LeaseIdentity(); epoch != 2 || !strings.HasPrefix(holder, "a:") {
		t.Errorf("lease identity %d %q, want epoch 2 held by a", epoch, holder)
	}
}

// Only a router that controls the fleet writes the handoff document, and
// Close releases its lease.
func TestWritesOnlyWhileControlling(t *testing.T) {
	clk := ports.NewFake(t0)
	lpath := filepath.Join(t.TempDir(), "lease.json")
	rt := newFakeRouter(t)
	rt.snap = Snapshot{Roles: []EngineRole{{"d0", "decode"}, {"p0", "prefill"}, {"p1", "prefill"}}}
	var spath string
	h := newTestHA(t, rt, func(c *Config) { c.Clock, c.Lease, spath = clk, testLease(t, lpath, "a", clk, 1), c.StatePath })
	if err := h.WriteHandoff(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(spath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a router without its lease wrote the handoff: %v", err)
	}
	h.Start() // claims
	h.Changed()
	h.Close()
	doc, err := state.Read(spath)
	if err != nil {
		t.Fatalf("the lease holder's change was not written by Close: %v", err)
	}
	if doc.Epoch != 1 || !strings.HasPrefix(doc.Holder, "a:") {
		t.Errorf("document epoch %d holder %q, want the lease's", doc.Epoch, doc.Holder)
	}
	if h.cfg.Lease.Valid() {
		t.Error("Close kept the lease; a standby would wait out its ttl")
	}
}

// A standby shadows its primary; when the primary stops answering and its
// lease expires, the standby applies the primary's last document, records
// engine identities, controls the fleet and writes its own document under
// the next lease epoch.
func TestStandbyTakesOverFromASilentPrimary(t *testing.T) {
	clk := ports.NewFake(t0)
	lpath := filepath.Join(t.TempDir(), "lease.json")
	prt := newFakeRouter(t)
	prt.snap = testSnapshot()
	primary := newTestHA(t, prt, func(c *Config) { c.Clock, c.Lease = clk, testLease(t, lpath, "a", clk, 1) })
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
		c.Clock, c.Lease, c.StandbyOf, spath = clk, testLease(t, lpath, "b", clk, 2), srv.URL, c.StatePath
	})
	h.Start()
	if h.Controls() || h.NotControlling() != "shadowing" {
		t.Fatalf("a following standby: controls %v, not controlling %q", h.Controls(), h.NotControlling())
	}
	eventually(t, "the standby to store the primary's document", func() bool { _, err := state.Read(spath); return err == nil })
	silent.Store(true)
	eventually(t, "the takeover", func() bool {
		rt.mu.Lock()
		done := rt.identified > 0
		rt.mu.Unlock()
		if !done {
			clk.Advance(250 * time.Millisecond)
		}
		return done
	})
	got := rt.lastApplied(t)
	if got.Counters != prt.snap.Counters || got.Roles["p1"] != "decode" {
		t.Errorf("applied %+v, want the primary's counters and roles", got)
	}
	eventually(t, "the new primary's document", func() bool {
		doc, err := state.Read(spath)
		return err == nil && doc.Epoch == 2 && strings.HasPrefix(doc.Holder, "b:")
	})
	if !h.Controls() || h.NotControlling() != "" || h.Standby() {
		t.Errorf("after takeover: controls %v, not controlling %q, standby %v", h.Controls(), h.NotControlling(), h.Standby())
	}
}
