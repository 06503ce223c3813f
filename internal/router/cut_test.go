package router

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// pddd is one producer and three consumers: a decode engine can fail and
// leave its role covered twice over.
var pddd = []fleet.Role{fleet.Prefill, fleet.Decode, fleet.Decode, fleet.Decode}

// streamOutcome sends one streaming request and reports whether it ended
// in [DONE] and on which decode engine. A cut stream must be journalled
// failed with reason output_cut, not as the engine connection it broke.
func (h *harness) streamOutcome(t *testing.T, i int) (done bool, decode string) {
	t.Helper()
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": fmt.Sprint("cut ", i), "max_tokens": 16, "stream": true})
	if resp.StatusCode != 200 {
		t.Fatalf("request %d: %d %s", i, resp.StatusCode, out)
	}
	events := testkit.SSEData(t, out)
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.DecodeIID != nil {
		decode = *row.DecodeIID
	}
	done = events[len(events)-1] == "[DONE]"
	if !done && (row.Terminal != journal.TerminalFailed || row.Reason == nil || *row.Reason != string(fault.OutputCut)) {
		t.Errorf("cut stream %d journalled %s/%v, want failed/output_cut", i, row.Terminal, deref(row.Reason))
	}
	return done, decode
}

// A decode engine that cuts every stream after 5 tokens leaves placement
// after its first cut (a default quarantine, though failure_quarantine_s
// is 0), and the requests after it complete on its peers.
func TestMidStreamCutQuarantinesTheEngineByDefault(t *testing.T) {
	h := newHarness(t, pddd, fastRecovery)
	h.engines.Engines[1].SetFaults(simengine.Faults{DropAfterTokens: 5}) // d0 cuts every stream
	broken := 0
	for i := 0; i < 8; i++ {
		done, on := h.streamOutcome(t, i)
		if !done {
			broken++
			if on != "d0" {
				t.Fatalf("request %d broke on %s, not on the faulty d0", i, on)
			}
		}
	}
	if broken != 1 {
		t.Errorf("%d of 8 streams were cut, want 1: the first cut must hold d0 out of placement", broken)
	}
	if q := h.router.life.Quarantined(); len(q) != 1 || q[0] != "d0" {
		t.Errorf("quarantined %v, want [d0] after its mid-stream cut (default quarantine)", q)
	}
}

// With a short quarantine the cutting engine comes back and cuts again:
// at recovery.eject_after consecutive cuts it is ejected, and a streaming
// readmission probe keeps it out while it still cuts.
func TestMidStreamCutsEjectAtTheBreakerThreshold(t *testing.T) {
	h := newHarness(t, pddd, func(c *fleet.Config) {
		fastRecovery(c)
		c.Recovery.FailureQuarantineS = 0.01
	})
	h.engines.Engines[1].SetFaults(simengine.Faults{DropAfterTokens: 5})
	broken := 0
	for i := 0; i < 30 && !h.ejected("d0"); i++ {
		if done, _ := h.streamOutcome(t, i); !done {
			broken++
		}
		eventually(t, "the monitor pass ended the short quarantine", func() bool { return !slices.Contains(h.router.life.Quarantined(), "d0") })
	}
	if !h.ejected("d0") {
		t.Fatalf("d0 cut %d streams and is not ejected; streaks %v", broken, h.router.life.Streaks()["d0"])
	}
	if broken != h.cfg.Recovery.EjectAfter {
		t.Errorf("%d streams were cut before the ejection, want recovery.eject_after = %d", broken, h.cfg.Recovery.EjectAfter)
	}
	if cause := h.router.life.Ejected()["d0"]; cause != "output_cut" {
		t.Errorf("ejection cause %q, want output_cut", cause)
	}
	h.probesRun(t, "d0", 3) // readmission probes
	if !h.ejected("d0") {
		t.Fatal("d0 still cuts streams but a readmission probe let it back")
	}
	for i := 0; i < 4; i++ {
		if done, on := h.streamOutcome(t, 100+i); !done || on == "d0" {
			t.Fatalf("request %d after the ejection: done %v on %s", i, done, on)
		}
	}
	h.engines.Engines[1].SetFaults(simengine.Faults{})
	eventually(t, "d0 readmitted once it streams again", func() bool { return !h.ejected("d0") })
}

// A client that hangs up mid-stream is not the engine's fault: nothing
// counts against the engine and nothing holds it out.
func TestClientDisconnectMidStreamDoesNotCount(t *testing.T) {
	h := newHarness(t, pddd, fastRecovery)
	for i := 0; i < 4; i++ {
		c, cancel := context.WithCancel(ctx(t))
		req, _ := http.NewRequestWithContext(c, http.MethodPost, h.srv.URL+"/v1/completions",
			strings.NewReader(fmt.Sprintf(`{"prompt":"bye %d","max_tokens":200,"stream":true}`, i)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		h.noteRID(resp)
		buf := make([]byte, 64)
		if _, err := resp.Body.Read(buf); err != nil { // output has started
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()
		h.row(resp.Header.Get("X-Request-Id"))
	}
	for iid, s := range h.router.life.Streaks() {
		for class, n := range s {
			if n != 0 {
				t.Errorf("%s streak %s = %d after client disconnects", iid, class, n)
			}
		}
	}
	if q := h.router.life.Quarantined(); len(q) != 0 {
		t.Errorf("quarantined %v after client disconnects", q)
	}
}
