package router

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/narwhal-go/narwhal/internal/journal"
	"github.com/narwhal-go/narwhal/internal/testkit"
)

// lpAnswer is what a client read from one answer: its text, the logprobs
// entries (chat's content entries, or completions' tokens with their top
// dicts), and the usage it was told.
type lpAnswer struct {
	text       string
	tokens     []string  // the logprobs' token strings, in order
	logprobs   []float64 // each token's logprob
	tops       []int     // candidates per token
	completion int       // usage.completion_tokens
}

type lpChunk struct {
	Choices []struct {
		Text     string
		Delta    *struct{ Content string }
		Message  *struct{ Content string }
		Logprobs *struct {
			Content []struct {
				Token       string
				Logprob     float64
				TopLogprobs []struct{ Token string } `json:"top_logprobs"`
			}
			Tokens        []string
			TokenLogprobs []float64            `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		}
	}
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	}
}

func (a *lpAnswer) fold(t *testing.T, data []byte) {
	t.Helper()
	var c lpChunk
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("answer %s: %v", data, err)
	}
	if c.Usage != nil {
		a.completion = c.Usage.CompletionTokens
	}
	for _, ch := range c.Choices {
		a.text += ch.Text
		if ch.Delta != nil {
			a.text += ch.Delta.Content
		}
		if ch.Message != nil {
			a.text += ch.Message.Content
		}
		if ch.Logprobs == nil {
			continue
		}
		for _, e := range ch.Logprobs.Content {
			a.tokens, a.logprobs, a.tops = append(a.tokens, e.Token), append(a.logprobs, e.Logprob), append(a.tops, len(e.TopLogprobs))
		}
		for i, tok := range ch.Logprobs.Tokens {
			a.tokens, a.logprobs, a.tops = append(a.tokens, tok), append(a.logprobs, ch.Logprobs.TokenLogprobs[i]), append(a.tops, len(ch.Logprobs.TopLogprobs[i]))
		}
	}
}

// read folds a streamed or a non-streamed answer.
func readLP(t *testing.T, raw []byte, stream bool) lpAnswer {
	t.Helper()
	var a lpAnswer
	if !stream {
		a.fold(t, raw)
		return a
	}
	for _, ev := range testkit.SSEData(t, raw) {
		if ev != "[DONE]" {
			a.fold(t, []byte(ev))
		}
	}
	return a
}

// Logprobs asked through the router come from the decode leg and reach
// the client, streamed and assembled: one entry per completion token,
// their tokens spelling the text the client got, as many candidates as
// asked, and the same numbers a direct run on one engine gives (the
// prefill leg's discarded token does not shift them).
func TestLogprobsThroughTheRouter(t *testing.T) {
	h := newHarness(t, pd, nil)
	const maxTokens = 7
	for _, tc := range []struct {
		chat   bool
		stream bool
		top    int
	}{
		{true, false, 3}, {true, true, 3}, {false, false, 2}, {false, true, 2}, {true, true, 0}, {false, false, 0},
	} {
		name := fmt.Sprintf("chat=%v stream=%v top=%d", tc.chat, tc.stream, tc.top)
		path, body := "/v1/completions", map[string]any{"model": model, "prompt": "logprobs please", "logprobs": tc.top}
		wantTops := max(tc.top, 1) // completions: the sampled token's dict entry at least
		if tc.chat {
			path = "/v1/chat/completions"
			body = map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "logprobs please"}},
				"logprobs": true, "top_logprobs": tc.top}
			wantTops = tc.top
		}
		body["max_tokens"] = maxTokens
		ref := readLP(t, direct(t, h.engines.URLs()[1], path, body), false)
		body["stream"] = tc.stream
		if tc.stream {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
		resp, raw := h.post(context.Background(), path, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", name, resp.StatusCode, raw)
		}
		got := readLP(t, raw, tc.stream)
		if got.completion != maxTokens || len(got.tokens) != got.completion {
			t.Errorf("%s: %d logprobs entries for %d completion tokens, want %d", name, len(got.tokens), got.completion, maxTokens)
		}
		if strings.Join(got.tokens, "") != got.text {
			t.Errorf("%s: logprobs tokens %q, text %q", name, strings.Join(got.tokens, ""), got.text)
		}
		for i, n := range got.tops {
			if n != wantTops {
				t.Errorf("%s: token %d has %d candidates, want %d", name, i, n, wantTops)
			}
		}
		if !reflect.DeepEqual(got.logprobs, ref.logprobs) || !reflect.DeepEqual(got.tokens, ref.tokens) {
			t.Errorf("%s: logprobs %v %q, a direct run on one engine %v %q", name, got.logprobs, got.tokens, ref.logprobs, ref.tokens)
		}
	}
}

// Without logprobs the client's answer says null, as vLLM's does.
func TestNoLogprobsUnasked(t *testing.T) {
	h := newHarness(t, pd, nil)
	for _, stream := range []bool{false, true} {
		resp, raw := h.post(context.Background(), "/v1/completions", map[string]any{"model": model, "prompt": "x", "max_tokens": 3, "stream": stream})
		if resp.StatusCode != 200 {
			t.Fatalf("stream=%v: %d %s", stream, resp.StatusCode, raw)
		}
		if a := readLP(t, raw, stream); len(a.tokens) != 0 || !strings.Contains(string(raw), `"logprobs":null`) {
			t.Errorf("stream=%v: logprobs nobody asked for: %s", stream, raw)
		}
	}
}

// The official OpenAI JavaScript SDK reads the logprobs a router answers,
// streamed and not (scripts/node/openai-logprobs.mjs checks them).
func TestOpenAISDKReadsLogprobs(t *testing.T) {
	node, dir := testkit.NodeSDK(t)
	script := filepath.Join(dir, "openai-logprobs.mjs")
	h := newHarness(t, pd, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, script, h.srv.URL+"/v1", model).CombinedOutput()
	if err != nil {
		t.Fatalf("the OpenAI SDK run failed: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), `"ok":true`); n != 4 {
		t.Errorf("%d of 4 SDK cases ok:\n%s", n, out)
	}
	t.Logf("OpenAI SDK: %s", out)
	h.noteJournalled(4) // one request per case, sent by the SDK, not h.post
}

// noteJournalled waits (bounded) until the journal has n rows and counts
// their request ids as answered, for requests a test sent without h.post.
func (h *harness) noteJournalled(n int) {
	h.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		j, err := journal.ReadFile(h.jpath)
		if err != nil {
			h.t.Fatal(err)
		}
		if len(j.Requests) < n {
			continue
		}
		h.mu.Lock()
		for _, r := range j.Requests {
			h.rids = append(h.rids, r.Request.RID)
		}
		h.mu.Unlock()
		return
	}
	h.t.Fatalf("the journal never reached %d rows", n)
}
