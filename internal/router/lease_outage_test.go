package router

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/ports"
	"github.com/narwhal-go/narwhal/internal/state"
)

// A router whose lease file becomes unusable for longer than the lease
// ttl is fenced and says why on /health and /ready for the whole outage;
// once the file is usable again it claims the lease at a new epoch and
// /ready is 200 and completions are placed within two lease periods.
func TestRouterServesAgainAfterALeaseOutage(t *testing.T) {
	const ttl = 2 * time.Second
	path := filepath.Join(t.TempDir(), "lease.json")
	l, err := state.NewLease(path, "a", ttl, 500*time.Millisecond, 500*time.Millisecond, ports.SystemClock(), ports.RandomIDs())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, pd, nil, func(o *Options) { o.HA.Lease = l })
	waitReady := func(within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for h.ready(t).code != http.StatusOK {
			if time.Since(start) > within {
				t.Fatalf("/ready not 200 within %v: %+v", within, h.ready(t))
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitReady(2 * ttl)
	epoch := l.Epoch()
	// A directory where the lock file goes: every open of it fails.
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path+".lock", 0o755); err != nil {
		t.Fatal(err)
	}
	const why = "lease renewal failed; retrying"
	for start := time.Now(); h.ready(t).Reason != why; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 2*ttl {
			t.Fatalf("not fenced with %q within %v: %+v", why, 2*ttl, h.ready(t))
		}
	}
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var health struct{ Status string }
		if err := json.Unmarshal([]byte(get(t, h.srv.URL+"/health")), &health); err != nil {
			t.Fatal(err)
		}
		if d := h.ready(t); d.code != http.StatusServiceUnavailable || d.Reason != why || health.Status != "fenced" {
			t.Fatalf("during the outage: /ready %d %q, /health %q; want 503 %q, fenced", d.code, d.Reason, health.Status, why)
		}
	}
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	took := waitReady(2 * ttl)
	t.Logf("/ready 200 %v after the lease file was usable again", took)
	if l.Epoch() <= epoch {
		t.Errorf("serving at epoch %d, want past %d", l.Epoch(), epoch)
	}
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("completion after the reclaim: %d %s", resp.StatusCode, out)
	}
}
