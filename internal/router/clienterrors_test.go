package router

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
)

// legCounter sits in front of every engine and counts the completion legs
// they are sent; with reject set it answers them itself with that status
// and body instead of passing them on.
type legCounter struct {
	legs   atomic.Int64
	mu     sync.Mutex
	status int
	body   string
	traces []string // each leg's traceparent header, in arrival order
}

// takeTraces returns the traceparents the legs carried so far and forgets them.
func (lc *legCounter) takeTraces() []string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	out := lc.traces
	lc.traces = nil
	return out
}

func (lc *legCounter) rejectWith(status int, body string) {
	lc.mu.Lock()
	lc.status, lc.body = status, body
	lc.mu.Unlock()
}

// countLegs rewrites the fleet's engine URLs to counting proxies. Use it
// inside a newHarness fleet modifier.
func countLegs(t *testing.T, c *fleet.Config) *legCounter {
	lc := &legCounter{}
	for i := range c.Engines {
		target, _ := url.Parse(c.Engines[i].URL)
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.FlushInterval = -1
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
			if q.Method == http.MethodPost && strings.HasSuffix(q.URL.Path, "completions") {
				lc.legs.Add(1)
				lc.mu.Lock()
				status, body := lc.status, lc.body
				lc.traces = append(lc.traces, q.Header.Get("Traceparent"))
				lc.mu.Unlock()
				if status != 0 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					w.Write([]byte(body))
					return
				}
			}
			rp.ServeHTTP(w, q)
		}))
		t.Cleanup(srv.Close)
		c.Engines[i].URL = srv.URL
	}
	return lc
}

func ids(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 100 + i%50
	}
	return out
}

// Bad inputs the engines would refuse are refused by the router before any
// leg, as 400 with the field that is wrong (simengine's max_model_len is
// 4096, reported on its /v1/models).
func TestBadInputsAre400WithoutALeg(t *testing.T) {
	var lc *legCounter
	h := newHarness(t, pd, func(c *fleet.Config) { lc = countLegs(t, c) })
	user := func(content any) []map[string]any { return []map[string]any{{"role": "user", "content": content}} }
	cases := []struct {
		name  string
		path  string
		body  map[string]any
		param string
		code  string
	}{
		{"max_tokens 0", "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 0}, "max_tokens", "invalid_value"},
		{"max_tokens -1", "/v1/completions", map[string]any{"prompt": "x", "max_tokens": -1}, "max_tokens", "invalid_value"},
		{"max_tokens 1e9", "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1_000_000_000}, "max_tokens", "context_length_exceeded"},
		{"max_completion_tokens 0", "/v1/chat/completions", map[string]any{"messages": user("hi"), "max_completion_tokens": 0}, "max_completion_tokens", "invalid_value"},
		{"token prompt over the context", "/v1/completions", map[string]any{"prompt": ids(5000), "max_tokens": 1}, "prompt", "context_length_exceeded"},
		{"text prompt over the context", "/v1/completions", map[string]any{"prompt": strings.Repeat("word ", 5000), "max_tokens": 1}, "prompt", "context_length_exceeded"},
		{"chat over the context", "/v1/chat/completions", map[string]any{"messages": user(strings.Repeat("word ", 5000))}, "messages", "context_length_exceeded"},
		{"prompt + max_tokens over the context", "/v1/completions", map[string]any{"prompt": ids(4000), "max_tokens": 200}, "max_tokens", "context_length_exceeded"},
		{"batch of prompts", "/v1/completions", map[string]any{"prompt": []string{"a", "b"}, "max_tokens": 1}, "prompt", "unsupported_value"},
		{"batch of token prompts", "/v1/completions", map[string]any{"prompt": [][]int{{1, 2}, {3, 4}}, "max_tokens": 1}, "prompt", "unsupported_value"},
		{"empty prompt", "/v1/completions", map[string]any{"prompt": "", "max_tokens": 1}, "prompt", "invalid_value"},
		{"image part", "/v1/chat/completions", map[string]any{"messages": user([]map[string]any{
			{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": map[string]string{"url": "data:image/png;base64,AAAA"}}}), "max_tokens": 2},
			"messages[0].content[1]", "unsupported_value"},
		{"n 0", "/v1/completions", map[string]any{"prompt": "x", "n": 0, "max_tokens": 1}, "n", "invalid_value"},
		{"n -1", "/v1/completions", map[string]any{"prompt": "x", "n": -1, "max_tokens": 1}, "n", "invalid_value"},
		{"n 2", "/v1/completions", map[string]any{"prompt": "x", "n": 2, "max_tokens": 1}, "n", "unsupported_value"},
		{"stream_options a string", "/v1/completions", map[string]any{"prompt": "x", "stream": true, "stream_options": "yes", "max_tokens": 1}, "stream_options", "invalid_type"},
		{"include_usage a string", "/v1/completions", map[string]any{"prompt": "x", "stream": true, "stream_options": map[string]any{"include_usage": "yes"}, "max_tokens": 1}, "stream_options.include_usage", "invalid_type"},
		{"stream_options without stream", "/v1/completions", map[string]any{"prompt": "x", "stream_options": map[string]any{"include_usage": true}, "max_tokens": 1}, "stream_options", "invalid_value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := lc.legs.Load()
			resp, out := h.post(ctx(t), tc.path, tc.body)
			e, ok := openAIError(out)
			if resp.StatusCode != 400 || !ok || e.Type != "invalid_request_error" {
				t.Fatalf("%d %s, want 400 invalid_request_error", resp.StatusCode, out)
			}
			if e.Param == nil || *e.Param != tc.param || e.Code == nil || *e.Code != tc.code {
				t.Errorf("param %v code %v, want %s %s: %s", e.Param, e.Code, tc.param, tc.code, out)
			}
			if n := lc.legs.Load() - before; n != 0 {
				t.Errorf("the engines were sent %d legs for a request the router can refuse", n)
			}
			if row := h.row(resp.Header.Get("X-Request-Id")); row.Terminal != journal.TerminalInvalid {
				t.Errorf("journal terminal %s, want invalid", row.Terminal)
			}
		})
	}
}

// A request the engine itself refuses as invalid is answered with the
// engine's status and message, tried once, and not held against it.
func TestEngineRejectionPassesThrough(t *testing.T) {
	var lc *legCounter
	h := newHarness(t, ppdd, func(c *fleet.Config) { lc = countLegs(t, c) })

	t.Run("simengine refuses a field", func(t *testing.T) {
		before := lc.legs.Load()
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2, "stop": 5})
		e, ok := openAIError(out)
		if resp.StatusCode != 400 || !ok || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "stop must be a string") {
			t.Fatalf("%d %s, want 400 with the engine's message", resp.StatusCode, out)
		}
		if n := lc.legs.Load() - before; n != 1 {
			t.Errorf("%d legs, want exactly one attempt", n)
		}
		row := h.row(resp.Header.Get("X-Request-Id"))
		if row.Attempts != 1 || row.Terminal != journal.TerminalFailed || *row.Reason != string(fault.EngineRejected) || *row.Status != 400 {
			t.Errorf("journal attempts %d %s %v status %v", row.Attempts, row.Terminal, row.Reason, row.Status)
		}
	})

	t.Run("the message is stripped of hosts, URLs and credentials", func(t *testing.T) {
		lc.rejectWith(422, `{"object":"error","type":"BadRequestError","code":422,"param":"temperature",`+
			`"message":"temperature 9 is out of range; see http://10.1.2.3:8000/docs (engine gpu-7.internal:8000, Authorization: Bearer sk-secret-123456)"}`)
		defer lc.rejectWith(0, "")
		before := lc.legs.Load()
		resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2, "temperature": 9})
		e, ok := openAIError(out)
		if resp.StatusCode != 422 || !ok || e.Type != "invalid_request_error" {
			t.Fatalf("%d %s, want the engine's 422", resp.StatusCode, out)
		}
		for _, leak := range []string{"10.1.2.3", "http://", "gpu-7", "sk-secret"} {
			if strings.Contains(string(out), leak) {
				t.Errorf("the answer leaks %q: %s", leak, out)
			}
		}
		if !strings.Contains(e.Message, "temperature 9 is out of range") || e.Param == nil || *e.Param != "temperature" {
			t.Errorf("message %q param %v, want the engine's", e.Message, e.Param)
		}
		if n := lc.legs.Load() - before; n != 1 {
			t.Errorf("%d legs, want exactly one attempt", n)
		}
		if q := h.router.life.Quarantined(); len(q) != 0 || len(h.router.life.Ejected()) != 0 {
			t.Errorf("the engine was held against a client's mistake: quarantined %v ejected %v", q, h.router.life.Ejected())
		}
	})
}
