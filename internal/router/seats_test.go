package router

import (
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/saturation"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/units"
)

func queued(prefill, decode int, timeout float64) func(*fleet.Config) {
	return func(c *fleet.Config) {
		c.Serving.QueueCapacity, c.Serving.QueueTimeoutS = 8, timeout
		c.Serving.PrefillConcurrent, c.Serving.DecodeConcurrent = prefill, decode
		c.Serving.Admission = fleet.AdmissionOpen
	}
}

// With the queue on, each engine holds at most its phase seats; the rest
// wait for a seat and are served in turn.
func TestPhaseSeatsQueueRequests(t *testing.T) {
	h := newHarness(t, pd, queued(1, 1, 10))
	var wg sync.WaitGroup
	rids := make([]string, 4)
	for i := range rids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "seat me", "max_tokens": 6})
			if resp.StatusCode != 200 {
				t.Errorf("request %d: %d %s", i, resp.StatusCode, out)
			}
			rids[i] = resp.Header.Get("X-Request-Id")
		}()
	}
	wg.Wait()
	waited := 0.0
	for _, rid := range rids {
		row := h.row(rid)
		waited += row.QueueWaits.Prefill + row.QueueWaits.Decode
	}
	if waited == 0 {
		t.Error("four requests on one seat per phase, yet nobody waited for a seat")
	}
}

// Without the deadline queue, a prefill seat wait is bounded by
// serving.queue_timeout_s (with it, by the request's TTFT deadline:
// TestDeadlineQueue*).
func TestPrefillSeatWaitExpires(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) {
		queued(1, 4, 0.2)(c)
		c.Serving.DeadlineQueue = 0
	})
	h.engines.Engines[0].SetFaults(simengine.Faults{LatencyMultiplier: 40}) // the seat holder is slow (~0.6 s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "hold the seat", "max_tokens": 1})
	}()
	eventually(t, "the first request holds the prefill seat", func() bool {
		h.router.mu.Lock()
		defer h.router.mu.Unlock()
		return h.router.core.Instance("p0").Resident() == 1
	})
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "no seat for me", "max_tokens": 1})
	if resp.StatusCode != 504 {
		t.Fatalf("%d %s, want 504 expired", resp.StatusCode, out)
	}
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.Terminal != journal.TerminalExpired || *row.Reason != string(fault.QueueTimeout) || *row.ErrorType != "server_error" ||
		row.ErrorCode == nil || *row.ErrorCode != "expired" {
		t.Errorf("journal %s %v %v %v", row.Terminal, *row.Reason, *row.ErrorType, row.ErrorCode)
	}
	h.engines.Engines[0].SetFaults(simengine.Faults{})
	<-done
}

func TestSaturatedRouterRefuses(t *testing.T) {
	h := newHarness(t, pd, nil)
	for i := 0; i < saturation.Minimum; i++ {
		h.router.sat.Sized(units.Seconds(h.cfg.SLO.TTFT)) // sizing as slow as the whole TTFT target
	}
	h.router.sat.Update(0, h.router.clock.Now()) // what the next probe tick does
	resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("%d, want 429 with Retry-After 1", resp.StatusCode)
	}
	if row := h.row(resp.Header.Get("X-Request-Id")); *row.Reason != string(fault.Saturated) {
		t.Errorf("reason %v, want saturated", *row.Reason)
	}
}
