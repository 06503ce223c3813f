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
