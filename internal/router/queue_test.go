package router

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

// A client that leaves while its request waits in the deadline queue
// takes it out of the queue: a cancelled row, nothing left waiting.
func TestQueuedRequestLeavesWithItsClient(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.SLO.TTFT = 0.9 })
	f := h.front() // notes the router's rid even when the client has left
	h.engines.Engines[0].SetFaults(simengine.Faults{LatencyMultiplier: 4})
	long := promptPricedAt(0.35)
	var ahead sync.WaitGroup
	for range 2 {
		ahead.Add(1)
		go func() {
			defer ahead.Done()
			h.post(ctx(t), "/v1/completions", map[string]any{"prompt": long, "max_tokens": 1})
		}()
	}
	defer func() {
		h.engines.Engines[0].SetFaults(simengine.Faults{})
		ahead.Wait()
	}()
	queued := func(n int) func() bool {
		return func() bool {
			h.router.mu.Lock()
			defer h.router.mu.Unlock()
			return h.router.core.QueueLen() == n && len(h.router.waiting) == n
		}
	}
	eventually(t, "two requests are resident", func() bool {
		h.router.mu.Lock()
		defer h.router.mu.Unlock()
		return h.router.core.Snapshot(0).Engines[1].ResidentPrefill == 2
	})
	// Priced 0.35 s behind 0.7 s, a 0.9 s target leaves it waiting, for
	// 0.55 s at most.
	cctx, cancel := context.WithCancel(ctx(t))
	b, _ := json.Marshal(map[string]any{"prompt": long, "max_tokens": 1})
	req, _ := http.NewRequestWithContext(cctx, http.MethodPost, f.srv.URL+"/v1/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := http.DefaultClient.Do(req)
		done <- resp
	}()
	eventually(t, "the second request waits in the queue", queued(1))
	cancel()
	if resp := <-done; resp != nil {
		resp.Body.Close()
	}
	eventually(t, "the queue is empty again", queued(0))
	eventually(t, "the cancelled request has its row", func() bool {
		j, err := journal.ReadFile(h.jpath)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range j.Requests {
			if r.Request.Terminal == journal.TerminalCancelled && r.Request.QueueWaits.Prefill > 0 {
				return true
			}
		}
		return false
	})
}
