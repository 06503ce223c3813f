package router

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/fleet"
	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/simengine"
	"github.com/narwhal-go/narwhal/internal/testkit"
	"github.com/narwhal-go/narwhal/internal/vllm"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestCompletionsNonStreaming(t *testing.T) {
	h := newHarness(t, ppdd, nil)
	body := map[string]any{"model": model, "prompt": "the quick brown fox jumps over", "max_tokens": 8}
	resp, out := h.post(ctx(t), "/v1/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	var got struct {
		Object  string
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(direct(t, h.engines.URLs()[2], "/v1/completions", body), &ref)
	if got.Object != "text_completion" || got.Choices[0].Text != ref.Choices[0].Text || got.Choices[0].FinishReason != "length" {
		t.Errorf("response %s; want the aggregated text %q", out, ref.Choices[0].Text)
	}
	u := got.Usage
	if u.CompletionTokens != 8 || u.PromptTokens != ref.Usage.PromptTokens || u.TotalTokens != u.PromptTokens+8 {
		t.Errorf("usage = %+v, want %d prompt + 8 completion", u, ref.Usage.PromptTokens)
	}
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.Terminal != journal.TerminalCompleted || row.Crossed == nil || !*row.Crossed ||
		*row.PrefillIID == *row.DecodeIID || (*row.PrefillIID)[0] != 'p' || (*row.DecodeIID)[0] != 'd' {
		t.Errorf("journal row: terminal %s crossed %v prefill %v decode %v", row.Terminal, row.Crossed, *row.PrefillIID, *row.DecodeIID)
	}
	if row.OutputLen == nil || *row.OutputLen != 8 || row.TTFT == nil || row.TPOT == nil || !row.InputSized {
		t.Errorf("journal row accounting: output %v ttft %v tpot %v sized %v", row.OutputLen, row.TTFT, row.TPOT, row.InputSized)
	}
}

// A streamed chat through both engine transports (narwhal-serve
// --engine-transport) is the aggregated answer, with its journal row.
func TestChatStreaming(t *testing.T) {
	for _, tr := range []string{vllm.TransportH1, vllm.TransportNetHTTP} {
		t.Run(strings.ReplaceAll(tr, "/", ""), func(t *testing.T) { chatStreaming(t, tr) })
	}
}

func chatStreaming(t *testing.T, transport string) {
	h := newHarness(t, ppdd, nil, func(o *Options) { o.EngineTransport = transport })
	body := map[string]any{"model": model, "stream": true, "max_tokens": 6,
		"messages": []map[string]string{{"role": "user", "content": "say something short"}}}
	resp, out := h.post(ctx(t), "/v1/chat/completions", body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	events := testkit.SSEData(t, out)
	if events[len(events)-1] != "[DONE]" {
		t.Errorf("stream does not end with [DONE]: %q", events[len(events)-1])
	}
	if strings.Contains(string(out), "token_ids") {
		t.Error("token ids the router asked for leaked to a client that did not ask")
	}
	refBody := map[string]any{"model": model, "max_tokens": 6, "messages": body["messages"]}
	var ref struct {
		Choices []struct{ Message struct{ Content string } }
	}
	json.Unmarshal(direct(t, h.engines.URLs()[0], "/v1/chat/completions", refBody), &ref)
	if got, _ := testkit.StreamText(t, events); got != ref.Choices[0].Message.Content {
		t.Errorf("streamed %q, aggregated run says %q", got, ref.Choices[0].Message.Content)
	}
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.Terminal != journal.TerminalCompleted || !*row.Crossed || *row.Status != 200 {
		t.Errorf("journal row %+v", row)
	}
}

func TestStreamingUsageAndTokenIDsOnRequest(t *testing.T) {
	h := newHarness(t, pd, nil)
	body := map[string]any{"model": model, "prompt": "hello", "max_tokens": 4, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}, "return_token_ids": true}
	resp, out := h.post(ctx(t), "/v1/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if !strings.Contains(string(out), `"token_ids"`) || !strings.Contains(string(out), `"completion_tokens":4`) {
		t.Errorf("want token ids (asked for) and a usage chunk:\n%s", out)
	}
}

func TestInvalidRequests(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.Serving.MaxRequestBytes = 2000 })
	cases := []struct {
		name   string
		path   string
		body   any
		status int
		typ    string
		param  string
	}{
		{"wrong model", "/v1/completions", map[string]any{"model": "other", "prompt": "x"}, 404, "invalid_request_error", ""},
		{"max_tokens a string", "/v1/completions", map[string]any{"prompt": "x", "max_tokens": "5"}, 400, "invalid_request_error", "max_tokens"},
		{"max_tokens a bool", "/v1/completions", map[string]any{"prompt": "x", "max_tokens": true}, 400, "invalid_request_error", "max_tokens"},
		{"n 2", "/v1/completions", map[string]any{"prompt": "x", "n": 2}, 400, "invalid_request_error", ""},
		{"no messages", "/v1/chat/completions", map[string]any{"model": model}, 400, "invalid_request_error", "messages"},
		{"kv params through xargs", "/v1/completions", map[string]any{"prompt": "x", "vllm_xargs": map[string]any{"kv_transfer_params": 1}}, 400, "invalid_request_error", "vllm_xargs"},
		{"continuation on", "/v1/completions", map[string]any{"prompt": "x", "narwhal_continuation": true}, 400, "invalid_request_error", "narwhal_continuation"},
		{"continuation null", "/v1/completions", map[string]any{"prompt": "x", "narwhal_continuation": nil}, 400, "invalid_request_error", "narwhal_continuation"},
		{"too large", "/v1/completions", map[string]any{"prompt": strings.Repeat("x", 3000)}, 413, "invalid_request_error", ""},
		{"not an object", "/v1/completions", []int{1}, 400, "invalid_request_error", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := h.post(ctx(t), tc.path, tc.body)
			var e struct {
				Error struct {
					Type  string
					Param *string
				}
			}
			json.Unmarshal(out, &e)
			if resp.StatusCode != tc.status || e.Error.Type != tc.typ {
				t.Errorf("got %d %s, want %d %s", resp.StatusCode, out, tc.status, tc.typ)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param = %v, want %s", e.Error.Param, tc.param)
			}
			if row := h.row(resp.Header.Get("X-Request-Id")); row.Terminal != journal.TerminalInvalid || *row.Status != tc.status {
				t.Errorf("journal terminal %s status %v", row.Terminal, row.Status)
			}
		})
	}
}

func TestRefusedWhenThePromptCannotMeetTTFT(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.SLO.TTFT = 0.016 })
	// The profile prices any prompt at ≥ 15 ms; a few hundred tokens go past 16 ms.
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": strings.Repeat("word ", 300), "max_tokens": 2})
	// Not a 429: retrying cannot help, so the client is told what to change
	// (a documented deviation from the reference's 429).
	e, ok := openAIError(out)
	if resp.StatusCode != 400 || resp.Header.Get("Retry-After") != "" || !ok || e.Type != "invalid_request_error" ||
		e.Code == nil || *e.Code != "prompt_exceeds_ttft_slo" || e.Param == nil || *e.Param != "prompt" ||
		!strings.Contains(e.Message, "slo.ttft_s") {
		t.Fatalf("status %d Retry-After %q: %s; want 400 prompt_exceeds_ttft_slo saying how to fix it", resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.Terminal != journal.TerminalRefused || *row.Reason != journal.CausePrompt || *row.RefusedCause != journal.CausePrompt {
		t.Errorf("journal %s %v", row.Terminal, *row.Reason)
	}
}

// A request whose TTFT target cannot be met now: with the deadline queue
// off it is refused at once (cause queue); with it on (the default) it
// waits until its deadline and only then is refused (cause deadline). Both
// answers are one 429 with a computed Retry-After that tells the SDK a
// retry can help.
func TestRefusedWithRetryAfterWhenTheQueueIsDeep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queue  int
		reason string
		waits  bool
	}{
		{"queue off", 0, journal.CauseQueue, false},
		{"queue on", 1024, journal.CauseDeadline, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, pd, func(c *fleet.Config) { c.SLO.TTFT = 0.5; c.Serving.DeadlineQueue = tc.queue })
			resp, release := refusedBehindResident(t, h)
			defer release()
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Should-Retry") != "true" {
				t.Errorf("status %d, Retry-After %q, X-Should-Retry %q; want 429 with Retry-After, retry allowed",
					resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry"))
			}
			row := h.row(resp.Header.Get("X-Request-Id"))
			if *row.Reason != tc.reason {
				t.Errorf("refusal cause %s, want %s", *row.Reason, tc.reason)
			}
			if waited := row.QueueWaits.Prefill > 0; waited != tc.waits {
				t.Errorf("queue_waits.prefill %.3f s; waited %v, want %v", row.QueueWaits.Prefill, waited, tc.waits)
			}
		})
	}
}

// refusedBehindResident posts a request priced at 0.3 s while a copy of
// it is resident on the only prefill engine, slowed, and returns the
// answer; release lets the resident one finish and waits for it. Slowed
// 6×, the resident prefill (~1.8 s) outlasts the second one's 0.5 s wait.
func refusedBehindResident(t *testing.T, h *harness) (*http.Response, func()) {
	h.engines.Engines[0].SetFaults(simengine.Faults{LatencyMultiplier: 6})
	long := promptPricedAt(0.3)
	first := make(chan struct{})
	go func() {
		defer close(first)
		h.post(ctx(t), "/v1/completions", map[string]any{"prompt": long, "max_tokens": 1})
	}()
	release := func() {
		h.engines.Engines[0].SetFaults(simengine.Faults{})
		<-first
	}
	eventually(t, "the first request is resident", func() bool {
		h.router.mu.Lock()
		defer h.router.mu.Unlock()
		return h.router.core.Snapshot(0).Engines[1].ResidentPrefill > 0
	})
	resp, _ := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": long, "max_tokens": 1})
	return resp, release
}

func TestSeatsFull(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.Serving.MaxConnections = 1 })
	h.engines.Engines[1].SetFaults(simengine.Faults{StallSeconds: 1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
	}()
	var resp *http.Response
	for i := 0; i < 200 && resp == nil; i++ {
		time.Sleep(10 * time.Millisecond)
		if h.router.retained.Load() == 1 {
			resp, _ = h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 2})
		}
	}
	if resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second request: %v; want 429 with Retry-After 1", resp)
	}
	if row := h.row(resp.Header.Get("X-Request-Id")); row.Terminal != journal.TerminalRejected || *row.Reason != string(fault.InflightLimit) {
		t.Errorf("journal %s %v", row.Terminal, *row.Reason)
	}
	<-done
}

func TestFailedPrefillIsRetriedOnAnotherEngine(t *testing.T) {
	h := newHarness(t, ppdd, nil)
	h.engines.Engines[0].SetFaults(simengine.Faults{HTTP500Rate: 1}) // p0 answers 500
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "retry me", "max_tokens": 3})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	row := h.row(resp.Header.Get("X-Request-Id"))
	// The router places the leg again itself, within the attempt.
	if row.Attempts != 1 || *row.PrefillIID != "p1" || len(row.AttemptFailures) != 1 {
		t.Fatalf("attempts %d prefill %s failures %+v", row.Attempts, *row.PrefillIID, row.AttemptFailures)
	}
	f := row.AttemptFailures[0]
	if f.Phase != "prefill" || *f.PrefillIID != "p0" || *f.Status != 500 || !f.RetryScheduled || f.RetryReason != journal.RetryReplaced {
		t.Errorf("failure entry %+v", f)
	}
}

// Every engine answers 500: the router places the leg again once, then
// answers 502 telling the SDK not to retry.
func TestPrefillFailureWithoutRetriesIs502(t *testing.T) {
	h := newHarness(t, pd, func(c *fleet.Config) { c.Serving.MaxAttempts = 1 })
	for _, e := range h.engines.Engines {
		e.SetFaults(simengine.Faults{HTTP500Rate: 1})
	}
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 3})
	if resp.StatusCode != 502 || !strings.Contains(string(out), `"code":"prefill"`) || strings.Contains(string(out), "127.0.0.1") {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if got := resp.Header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("X-Should-Retry %q, want false: the router already placed it again", got)
	}
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.Terminal != journal.TerminalFailed || *row.Reason != string(fault.EngineError) || row.Error == nil {
		t.Errorf("journal %s %v %v", row.Terminal, row.Reason, row.Error)
	}
}

func TestDecodeEngineDyingMidStream(t *testing.T) {
	h := newHarness(t, pd, nil)
	h.engines.Engines[1].SetFaults(simengine.Faults{DropAfterTokens: 3})
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 10, "stream": true})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	events := testkit.SSEData(t, out)
	last := events[len(events)-1]
	if !strings.Contains(last, `"error"`) || !strings.Contains(last, `"code":"failed"`) {
		t.Fatalf("last event %q, want the terminal error event", last)
	}
	if got, _ := testkit.StreamText(t, events[:len(events)-1]); got == "" {
		t.Error("no output before the failure")
	}
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.Terminal != journal.TerminalFailed || *row.Status != 200 || len(row.AttemptFailures) != 1 || !row.AttemptFailures[0].OutputStarted {
		t.Errorf("journal %s status %v failures %+v", row.Terminal, row.Status, row.AttemptFailures)
	}
}

func TestClientDisconnectAbortsTheLegs(t *testing.T) {
	h := newHarness(t, pd, nil)
	c, cancel := context.WithCancel(ctx(t))
	b := strings.NewReader(`{"prompt":"x","max_tokens":400,"stream":true}`)
	req, _ := http.NewRequestWithContext(c, http.MethodPost, h.srv.URL+"/v1/completions", b)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	h.noteRID(resp)
	line, _ := bufio.NewReader(resp.Body).ReadString('\n') // first chunk: output started
	if !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q", line)
	}
	cancel()
	resp.Body.Close()
	row := h.row(resp.Header.Get("X-Request-Id"))
	if row.Terminal != journal.TerminalCancelled || row.CancelledPhase == nil || *row.CancelledPhase != "decode" || row.Status != nil {
		t.Errorf("journal %s phase %v status %v", row.Terminal, row.CancelledPhase, row.Status)
	}
	// The decode engine stops generating: nothing stays running.
	for i := 0; ; i++ {
		st := h.engines.Engines[1].State()
		if st.Running == 0 && st.Waiting == 0 {
			break
		}
		if i > 200 {
			t.Fatalf("decode engine still runs the aborted request: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSameEngineWhenOnlyOneEngine(t *testing.T) {
	h := newHarness(t, []fleet.Role{fleet.Decode}, nil)
	resp, out := h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "alone", "max_tokens": 3})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if row := h.row(resp.Header.Get("X-Request-Id")); *row.Crossed || *row.PrefillIID != "d0" || *row.DecodeIID != "d0" {
		t.Errorf("crossed %v on %s/%s", *row.Crossed, *row.PrefillIID, *row.DecodeIID)
	}
}

func TestControlRoutes(t *testing.T) {
	h := newHarness(t, pd, nil)
	for path, want := range map[string]string{
		"/v1/models":     `"id":"` + model + `"`,
		"/health":        `"ok"`,
		"/ready":         `"status":"ready"`,
		"/narwhal/state": `"schema":"narwhal.state"`,
		"/metrics":       "narwhal_offered_total",
	} {
		resp, err := http.Get(h.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b := new(strings.Builder)
		bufio.NewReader(resp.Body).WriteTo(b)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(b.String(), want) {
			t.Errorf("GET %s: %d, want %q in %.300s", path, resp.StatusCode, want, b.String())
		}
	}
}

// promptPricedAt returns a prompt whose profiled prefill takes about s
// seconds on the harness engines.
func promptPricedAt(s float64) string {
	row := simengine.DefaultProfile("x")
	k := 1
	for row.PrefillTime(simengine.CountTokens(strings.Repeat("word ", k))) < s {
		k += 10
	}
	return strings.Repeat("word ", k)
}

func TestMetricsFollowOutcomes(t *testing.T) {
	h := newHarness(t, pd, nil)
	h.post(ctx(t), "/v1/completions", map[string]any{"prompt": "count me", "max_tokens": 3})
	h.post(ctx(t), "/v1/completions", map[string]any{"model": "nope", "prompt": "x"})
	resp, err := http.Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b := new(strings.Builder)
	bufio.NewReader(resp.Body).WriteTo(b)
	resp.Body.Close()
	for _, want := range []string{
		"narwhal_offered_total 2", "narwhal_served_total 1", "narwhal_invalid_requests_total 1",
		"narwhal_prefill_attempts_total 1", "narwhal_decode_attempts_total 1",
		`narwhal_ttft_seconds_count{slo="2"} 1`, `narwhal_tpot_seconds_count{slo="0.1"} 1`,
		`narwhal_pool_instances{role="prefill"} 1`, `narwhal_failed_total{reason="engine_error"} 0`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestSequentialRequestsReuseEngineConnections: the router keeps its
// engine connections alive across requests, the decode leg's included:
// its stream is read to its very end, so the connection goes back. A leg
// that closed its stream early (cancelling before the body's end, as the
// transport's first version did) opens a connection per request here;
// one that stops at [DONE] without reading the terminator after it
// (vllm.TestStreamKeepsItsConnectionAfterDone pins that down) opened one
// in about three.
func TestSequentialRequestsReuseEngineConnections(t *testing.T) {
	h := newHarness(t, []fleet.Role{fleet.Prefill, fleet.Decode}, nil)
	body := map[string]any{"model": model, "stream": true, "max_tokens": 4, "prompt": "keep the line open"}
	send := func() {
		resp, out := h.post(ctx(t), "/v1/completions", body)
		if resp.StatusCode != 200 || !strings.HasSuffix(strings.TrimSpace(string(out)), "[DONE]") {
			t.Fatalf("status %d: %s", resp.StatusCode, out)
		}
	}
	send() // the first request opens the legs' connections
	p, d := h.engines.Engines[0], h.engines.Engines[1]
	p0, d0 := p.Connections(), d.Connections()
	for range 16 {
		send()
	}
	// A probe may open a connection of its own meanwhile.
	if np, nd := p.Connections()-p0, d.Connections()-d0; np > 1 || nd > 1 {
		t.Fatalf("16 sequential requests opened %d prefill and %d decode connections, want at most 1 each", np, nd)
	}
}
