package router

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/state"
)

// slowGate stands in front of one engine's attestation sidecar: once
// armed, a request waits until the test releases it (or 20 s pass, the
// slow sidecar of the issue), then goes through to the sidecar.
type slowGate struct {
	armed, waiting atomic.Bool
	release        chan struct{}
	proxy          *httputil.ReverseProxy
}

func newSlowGate(t *testing.T, sidecar string) (*slowGate, string) {
	target, err := url.Parse(sidecar)
	if err != nil {
		t.Fatal(err)
	}
	g := &slowGate{release: make(chan struct{}), proxy: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL + target.Path
}

func (g *slowGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.armed.Load() {
		g.waiting.Store(true)
		select {
		case <-g.release:
		case <-time.After(20 * time.Second):
		case <-r.Context().Done():
		}
		g.waiting.Store(false)
	}
	g.proxy.ServeHTTP(w, r)
}

// An ejected engine's readmission waits on its attestation for as long as
// the sidecar takes (here until the test releases it): meanwhile the
// monitor pass goes on — the handoff document is rewritten at its
// interval, role control flips an engine when the decode pool empties,
// and requests are placed on the new decode engine. Were the readmission
// run inline on the monitor goroutine, none of that would happen until
// the attestation answered, and the waits below would time out.
func TestASlowAttestationDelaysNothingElse(t *testing.T) {
	var gate *slowGate
	statePath := filepath.Join(t.TempDir(), "state.json")
	h := startHarness(t, ppdd, harnessOptions{sidecars: true,
		mod: func(c *fleet.Config) {
			fastRecovery(c)
			completeContract(c)
			c.Controller.Advisory = false                                                   // role control acts
			c.Engine.HealthTimeoutS = 30                                                    // the attestation probe may take 20 s
			gate, c.Engines[3].AttestationURL = newSlowGate(t, c.Engines[3].AttestationURL) // d1
		},
		router: []func(*Options){func(o *Options) { o.HA.StatePath = statePath }},
	})
	if resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "warm", "max_tokens": 2}); resp.StatusCode != 200 {
		t.Fatalf("before the test: %d %s", resp.StatusCode, out)
	}

	// d1 goes away and is ejected; once it answers again its readmission
	// reaches the attestation gate, which holds.
	gate.armed.Store(true)
	d0, d1 := h.engines.Engines[2], h.engines.Engines[3]
	d1.SetFaults(simengine.Faults{RefuseConnections: true})
	eventually(t, "d1 ejected", func() bool { return h.ejected("d1") })
	d1.SetFaults(simengine.Faults{})
	eventually(t, "d1's readmission waiting on its attestation", gate.waiting.Load)

	// While it waits: the handoff is rewritten pass after pass.
	seen := map[float64]bool{}
	eventually(t, "five handoff writes while the gate holds", func() bool {
		if doc, err := state.Read(statePath); err == nil {
			seen[doc.At] = true
		}
		return len(seen) >= 5
	})
	// The last decode engine goes too: role control moves a prefill
	// engine to decode (the decode floor) and placement uses it.
	h.router.mu.Lock()
	flipsBefore := len(h.router.core.Control().History)
	h.router.mu.Unlock()
	d0.SetFaults(simengine.Faults{RefuseConnections: true})
	eventually(t, "d0 ejected", func() bool { return h.ejected("d0") })
	var to string
	eventually(t, "a prefill engine flipped to decode", func() bool {
		h.router.mu.Lock()
		defer h.router.mu.Unlock()
		hist := h.router.core.Control().History
		for _, f := range hist[min(flipsBefore, len(hist)):] {
			if f.To == fleet.Decode {
				to = f.IID
				return true
			}
		}
		return false
	})
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "during", "max_tokens": 2})
	if resp.StatusCode != 200 {
		t.Fatalf("a request while d1's gate holds: %d %s", resp.StatusCode, out)
	}
	if row := h.row(resp.Header.Get("X-Request-Id")); row.DecodeIID == nil || *row.DecodeIID != to {
		t.Errorf("decode leg on %v, want the flipped engine %s", row.DecodeIID, to)
	}
	if !gate.waiting.Load() {
		t.Fatal("the attestation gate stopped waiting before the release: the test proved nothing")
	}

	// Released, the attestation answers and d1 is readmitted.
	close(gate.release)
	eventually(t, "d1 readmitted once its attestation answered", func() bool { return !h.ejected("d1") })
	d0.SetFaults(simengine.Faults{})
}
