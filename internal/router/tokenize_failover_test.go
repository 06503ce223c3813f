package router

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

// Counting a prompt has no side effects, so an engine that drops the
// connection before answering (a dead process whose pooled connection
// the client reused, say) costs the request nothing: the count moves to
// the next engine within the same attempt, as a refused connection does.
func TestTokenizeFailsOverWhenTheConnectionDrops(t *testing.T) {
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode, fleet.Decode}, func(c *fleet.Config) {
		defaultServing(c)
		c.Engine.Tokenize = true
	})
	if h.cfg.Serving.MaxAttempts != 1 {
		t.Fatalf("max_attempts %d: the test is about the default", h.cfg.Serving.MaxAttempts)
	}
	// d0's /tokenize resets the connection without an answer; the rest
	// of d0 (its legs) answers as before.
	real, _ := url.Parse(h.engines.Engines[1].URL())
	proxy := httputil.NewSingleHostReverseProxy(real)
	proxy.FlushInterval = -1
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		if q.URL.Path != "/tokenize" {
			proxy.ServeHTTP(w, q)
			return
		}
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.(*net.TCPConn).SetLinger(0) // a reset, no answer
			c.Close()
		}
	}))
	defer drop.Close()
	// d0 is the least-loaded engine at rest (iid order breaks the tie), so
	// it is asked to count first.
	old := h.router.engines["d0"].client
	h.router.engines["d0"].client = vllm.NewClient(drop.URL, vllm.Options{})
	defer func() { h.router.engines["d0"].client.Close(); h.router.engines["d0"].client = old }()
	h.router.locked(func() {
		if iid := h.router.core.LeastResident(nil); iid != "d0" {
			t.Fatalf("least-loaded engine %s, want d0", iid)
		}
	})
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "count me elsewhere", "max_tokens": 2})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %s: counting must move to a peer when d0 drops the connection", resp.StatusCode, out)
	}
}
