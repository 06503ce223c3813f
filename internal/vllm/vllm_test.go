package vllm

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/fault"
	"github.com/narwhal-go/narwhal/internal/simengine"
)

func TestPrefillAndDecodeBodies(t *testing.T) {
	b, err := ParseBody([]byte(`{"model":"client","prompt":"hi","max_tokens":9,"stream":true,
		"stream_options":{"include_usage":true},"min_tokens":2,"n":1,"best_of":1,"max_completion_tokens":9,
		"kv_transfer_params":{"evil":1},"temperature":0.5,"narwhal_continuation":false}`))
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(PrefillBody(b, "served"), &p); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"stream_options", "min_tokens", "n", "best_of", "max_completion_tokens", "narwhal_continuation"} {
		if _, ok := p[gone]; ok {
			t.Errorf("prefill body keeps %s", gone)
		}
	}
	if p["model"] != "served" || p["max_tokens"] != 1.0 || p["stream"] != false || p["temperature"] != 0.5 {
		t.Errorf("prefill body = %v", p)
	}
	if kv, _ := json.Marshal(p["kv_transfer_params"]); string(kv) != `{"do_remote_decode":true}` {
		t.Errorf("prefill kv_transfer_params = %s", kv)
	}
	var d map[string]any
	if err := json.Unmarshal(DecodeBody(b, "served", json.RawMessage(`{"remote_engine_id":"x"}`)), &d); err != nil {
		t.Fatal(err)
	}
	if d["stream"] != true || d["return_token_ids"] != true || d["stream_interval"] != 1.0 || d["max_tokens"] != 9.0 || d["min_tokens"] != 2.0 {
		t.Errorf("decode body = %v", d)
	}
	if kv, _ := json.Marshal(d["kv_transfer_params"]); string(kv) != `{"remote_engine_id":"x"}` {
		t.Errorf("decode kv_transfer_params = %s", kv)
	}
	var same map[string]any
	if err := json.Unmarshal(DecodeBody(b, "served", nil), &same); err != nil {
		t.Fatal(err)
	}
	if _, ok := same["kv_transfer_params"]; ok {
		t.Error("same-engine decode keeps the client's kv_transfer_params")
	}
}

func TestParseBodyRejects(t *testing.T) {
	for _, in := range []string{``, `[]`, `null`, `{"a":1} x`, `{`} {
		if _, err := ParseBody([]byte(in)); err == nil {
			t.Errorf("ParseBody(%q) accepted", in)
		}
	}
}

func TestHandoffValidation(t *testing.T) {
	cases := []struct {
		name, body, err string
	}{
		{"top level", `{"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[1,2],"x":{"y":1}}}`, ""},
		{"in the choice", `{"choices":[{"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[[1],[2,3]]}}]}`, ""},
		{"absent", `{"choices":[{}]}`, "missing handoff parameters"},
		{"null", `{"kv_transfer_params":null}`, "missing handoff parameters"},
		{"empty", `{"kv_transfer_params":{}}`, "missing handoff parameters"},
		{"no engine id", `{"kv_transfer_params":{"remote_block_ids":[1]}}`, "requires remote_engine_id"},
		{"empty engine id", `{"kv_transfer_params":{"remote_engine_id":"","remote_block_ids":[1]}}`, "requires remote_engine_id"},
		{"negative block", `{"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[-1]}}`, "nonnegative remote_block_ids"},
		{"boolean block", `{"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[true]}}`, "nonnegative remote_block_ids"},
		{"fraction block", `{"kv_transfer_params":{"remote_engine_id":"e","remote_block_ids":[1.5]}}`, "nonnegative remote_block_ids"},
		{"no blocks", `{"kv_transfer_params":{"remote_engine_id":"e"}}`, "nonnegative remote_block_ids"},
		{"not json", `nope`, "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, e := parseHandoff([]byte(tc.body))
			if tc.err == "" {
				if e != nil || h.EngineID != "e" {
					t.Fatalf("got %v, %v", h, e)
				}
				if strings.Contains(tc.body, `"x"`) && !strings.Contains(string(h.Params), `"x":{"y":1}`) {
					t.Errorf("unknown keys not kept verbatim: %s", h.Params)
				}
				return
			}
			if e == nil || !strings.Contains(fault.As(e).Msg, tc.err) || fault.As(e).Reason != fault.InvalidResponse || fault.As(e).Class != "kv_handoff" {
				t.Errorf("error = %+v, want %q (invalid_response, kv_handoff)", e, tc.err)
			}
		})
	}
}

func TestParseEvent(t *testing.T) {
	cases := []struct {
		name    string
		data    string
		tokens  int
		output  bool
		done    bool
		errMsg  string
		status  int
		notJSON bool
	}{
		{"completion text", `{"choices":[{"text":" hi","token_ids":[5]}]}`, 1, true, false, "", 0, false},
		{"chat content", `{"choices":[{"delta":{"content":" a b"},"token_ids":[1,2]}]}`, 2, true, false, "", 0, false},
		{"role only", `{"choices":[{"delta":{"role":"assistant","content":""}}]}`, 0, false, false, "", 0, false},
		{"usage only", `{"choices":[],"usage":{"prompt_tokens":3}}`, 0, false, false, "", 0, false},
		{"done", `[DONE]`, 0, false, true, "", 0, false},
		{"text without ids", `{"choices":[{"text":" hi"}]}`, 0, false, false, "no valid token_ids", 0, false},
		{"boolean ids", `{"choices":[{"text":" hi","token_ids":[true]}]}`, 0, false, false, "no valid token_ids", 0, false},
		{"error event", `{"error":{"message":"boom","type":"InternalServerError","code":500}}`, 0, false, false, "boom", 500, false},
		{"error event with 503", `{"error":{"message":"x","code":503}}`, 0, false, false, "x", 503, false},
		{"error code out of range", `{"error":{"message":"x","code":7}}`, 0, false, false, "x", 500, false},
		{"not json", `hello`, 0, false, false, "", 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, e := parseEvent([]byte(tc.data))
			if tc.errMsg != "" {
				if e == nil || !strings.Contains(fault.As(e).Msg, tc.errMsg) || (tc.status != 0 && fault.As(e).Status != tc.status) {
					t.Fatalf("error = %+v, want %q status %d", e, tc.errMsg, tc.status)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			if ev.Tokens != tc.tokens || ev.Output != tc.output || ev.Done != tc.done || ev.NotJSON != tc.notJSON {
				t.Errorf("event = %+v", ev)
			}
		})
	}
}

func TestLineEndings(t *testing.T) {
	l := lineReader{r: bufio.NewReader(strings.NewReader("a\r\nb\rc\nd"))}
	for _, want := range []string{"a", "b", "c"} {
		got, err := l.next()
		if err != nil || string(got) != want {
			t.Fatalf("line = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := l.next(); err == nil {
		t.Error("a final line without a terminator must be an error")
	}
}

func TestStatusClassification(t *testing.T) {
	for _, tc := range []struct {
		status    int
		reason    fault.Reason
		timeout   bool
		transient bool
	}{
		{408, fault.EngineOverloaded, true, true}, {429, fault.EngineOverloaded, false, true}, {504, fault.EngineTimeout, true, true},
		{400, fault.EngineRejected, false, false}, {404, fault.EngineRejected, false, false}, {500, fault.EngineError, false, true},
		{503, fault.EngineError, false, true},
	} {
		e := statusError("prefill", tc.status, "x")
		if e.Reason != tc.reason || e.Timeout != tc.timeout || e.Transient() != tc.transient {
			t.Errorf("HTTP %d: %+v transient=%v", tc.status, e, e.Transient())
		}
	}
}

// pdClients are clients of a two-engine fleet's engines 0 and 1 and a
// 10-second context; all end with the test (before a fleet closed by an
// earlier t.Cleanup).
func pdClients(t *testing.T, fl *simengine.Fleet) (ctx context.Context, a, b *Client) {
	t.Helper()
	a, b = NewClient(fl.URLs()[0], Options{}), NewClient(fl.URLs()[1], Options{})
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx, a, b
}

// prefillDecode prefills a five-token completion on a and opens its decode
// leg on b with a's KV transfer parameters.
func prefillDecode(t *testing.T, ctx context.Context, a, b *Client) *Stream {
	t.Helper()
	body, _ := ParseBody([]byte(`{"model":"m","prompt":"the quick brown fox","max_tokens":5}`))
	h, e := a.Prefill(ctx, "/v1/completions", PrefillBody(body, "m"), "r1-a1-prefill")
	if e != nil {
		t.Fatalf("prefill: %v", e)
	}
	s, e := b.OpenStream(ctx, "/v1/completions", DecodeBody(body, "m", h.Params), "r1-a1-decode")
	if e != nil {
		t.Fatalf("decode: %v", e)
	}
	return s
}

// A full P/D exchange through the client against two simulated engines.
func TestClientAgainstSimengine(t *testing.T) {
	fl, err := simengine.StartFleet(2, simengine.Config{Model: "m", Profile: simengine.DefaultProfile("x")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Close() })
	ctx, a, b := pdClients(t, fl)
	n, e := a.Tokenize(ctx, []byte(`{"model":"m","prompt":"the quick brown fox"}`))
	if e != nil || n <= 0 {
		t.Fatalf("tokenize: %d %v", n, e)
	}
	s := prefillDecode(t, ctx, a, b)
	defer s.Close()
	s.SetIdleTimeout(5 * time.Second)
	tokens, done := 0, false
	for !done {
		ev, e := s.Next()
		if e != nil {
			t.Fatalf("stream: %v", e)
		}
		tokens += ev.Tokens
		done = ev.Done
	}
	if tokens != 5 {
		t.Errorf("decoded %d tokens, want 5", tokens)
	}
	if v, e := a.Version(ctx); e != nil || v == "" {
		t.Errorf("version: %q %v", v, e)
	}
	if e := a.Health(ctx); e != nil {
		t.Errorf("health: %v", e)
	}
}

func TestIdleTimeoutAbortsTheLeg(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // silent until the client gives up
	}))
	s := openTestStream(t, srv)
	s.SetIdleTimeout(50 * time.Millisecond)
	if _, e := s.Next(); e == nil || !fault.As(e).Timeout || !strings.Contains(fault.As(e).Msg, "silent") {
		t.Fatalf("error = %+v, want the between-token timeout", e)
	}
}

func TestUnreachableEngine(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := NewClient(url, Options{ConnectTimeout: time.Second})
	_, e := c.Prefill(context.Background(), "/v1/completions", []byte(`{}`), "x")
	if e == nil || fault.As(e).Reason != fault.EngineUnreachable || !fault.As(e).Transient() {
		t.Fatalf("error = %+v, want engine_unreachable", e)
	}
}
