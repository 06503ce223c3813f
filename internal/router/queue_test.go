package router

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
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

// Oversized client request ids do not grow the journal: each row keeps at
// most journal.MaxClientRID bytes of the id (the echo's bound too).
func TestOversizedRequestIDsKeepRowsSmall(t *testing.T) {
	h := newHarness(t, pd, nil)
	before := fileSize(t, h.jpath)
	const n = 20
	for k := 0; k < n; k++ {
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, h.srv.URL+"/v1/completions", bytes.NewReader([]byte("{not json")))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", string(bytes.Repeat([]byte{'a' + byte(k)}, 200<<10)))
		resp, out := testkit.Do(t, req)
		h.noteRID(resp)
		if resp.StatusCode != 400 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
	h.journalRows(n)
	if grew := fileSize(t, h.jpath) - before; grew > n*4096 {
		t.Errorf("the journal grew %d bytes for %d requests with 200 KiB ids, want at most 4 KiB each", grew, n)
	}
}

func fileSize(t *testing.T, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// The router's queue is earliest deadline first on the deadlines the core
// computes from real requests: B arrives after A but its long prompt
// leaves it less slack (deadline = arrival + slo.ttft_s − its own
// prefill), so it waits ahead of A; both leave the queue with an answer.
func TestQueueOrdersByDeadlineNotArrival(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.SLO.TTFT = 1.0 })
	h.engines.Engines[0].SetFaults(simengine.Faults{LatencyMultiplier: 4})
	var wg sync.WaitGroup
	codes := make(chan int, 4)
	post := func(prompt string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 1})
			codes <- resp.StatusCode
		}()
	}
	defer func() {
		h.engines.Engines[0].SetFaults(simengine.Faults{})
		wg.Wait()
	}()
	long := promptPricedAt(0.45)
	post(long)
	post(long) // 0.9 s of priced backlog ahead of both
	eventually(t, "two requests are resident", func() bool {
		h.router.mu.Lock()
		defer h.router.mu.Unlock()
		return h.router.core.Snapshot(0).Engines[1].ResidentPrefill == 2
	})
	waiting := func() []string {
		h.router.mu.Lock()
		defer h.router.mu.Unlock()
		return h.router.core.Queued(nil)
	}
	post(promptPricedAt(0.2)) // A: deadline = its arrival + 0.8 s
	eventually(t, "A waits", func() bool { return len(waiting()) == 1 })
	a := waiting()[0]
	post(promptPricedAt(0.5)) // B, moments later: deadline = its arrival + 0.5 s
	eventually(t, "A and B wait", func() bool { return len(waiting()) == 2 })
	if q := waiting(); len(q) == 2 && q[0] == a {
		t.Errorf("queue order %v: B (the earlier deadline) must wait ahead of A %s", q, a)
	}
	eventually(t, "the queue empties", func() bool { return len(waiting()) == 0 })
	h.engines.Engines[0].SetFaults(simengine.Faults{})
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK && c != http.StatusTooManyRequests {
			t.Errorf("a request answered %d; want 200, or 429 when its deadline passed", c)
		}
	}
}
