package simengine

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/narwhal-go/narwhal/internal/testkit"
)

// Contract tests check only what a real vLLM engine also does. Set
// NARWHAL_CONTRACT_URL=http://host:port (and NARWHAL_CONTRACT_API_KEY when
// the engine runs with --api-key) to run them against one; by default they
// run against an in-process simengine.
func contractTarget(t *testing.T) (base, modelName string, hdr []string) {
	t.Helper()
	base = os.Getenv("NARWHAL_CONTRACT_URL")
	if base == "" {
		e := startEngine(t, nil)
		base = e.URL()
	}
	base = strings.TrimRight(base, "/")
	if k := os.Getenv("NARWHAL_CONTRACT_API_KEY"); k != "" {
		hdr = []string{"Authorization", "Bearer " + k}
	}
	_, b := testkit.Get(t, base+"/v1/models")
	var ms struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ms); err != nil || len(ms.Data) == 0 {
		t.Fatalf("/v1/models: %s", b)
	}
	return base, ms.Data[0].ID, hdr
}

func TestContractModelsVersionHealth(t *testing.T) {
	base, _, _ := contractTarget(t)
	resp, b := testkit.Get(t, base+"/v1/models")
	var ms struct {
		Object string `json:"object"`
		Data   []struct {
			Object      string `json:"object"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &ms) != nil || ms.Object != "list" || ms.Data[0].Object != "model" ||
		ms.Data[0].OwnedBy != "vllm" || ms.Data[0].MaxModelLen <= 0 {
		t.Fatalf("/v1/models = %d %s", resp.StatusCode, b)
	}
	resp, b = testkit.Get(t, base+"/version")
	var v map[string]string
	if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || len(v) != 1 || v["version"] == "" {
		t.Fatalf("/version = %d %s", resp.StatusCode, b)
	}
	if resp, _ = testkit.Get(t, base+"/health"); resp.StatusCode != 200 {
		t.Fatalf("/health = %d", resp.StatusCode)
	}
}

func TestContractCompletions(t *testing.T) {
	base, m, hdr := contractTarget(t)
	cases := []struct {
		name   string
		path   string
		body   map[string]any
		chat   bool
		stream bool
	}{
		{"completion", "/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 5}, false, false},
		{"completion stream", "/v1/completions", map[string]any{"prompt": "Once upon a time", "max_tokens": 5, "stream": true,
			"stream_options": map[string]any{"include_usage": true}}, false, true},
		{"chat", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi there"}}, "max_tokens": 5}, true, false},
		{"chat stream", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi there"}}, "max_tokens": 5,
			"stream": true, "stream_options": map[string]any{"include_usage": true}}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.body["model"] = m
			c.body["ignore_eos"] = true
			resp, b := post(t, base+c.path, c.body, append(hdr, "X-Request-Id", "contract-"+strings.ReplaceAll(c.name, " ", "-"))...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if !c.stream {
				checkFull(t, b, c.chat)
				return
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("Content-Type %q", ct)
			}
			evs := testkit.SSEData(t, b)
			if len(evs) < 3 || evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("stream does not end in [DONE]: %q", evs)
			}
			_, fin := testkit.StreamText(t, evs[:len(evs)-1])
			if fin != "length" {
				t.Errorf("finish_reason %q, want length", fin)
			}
			var u struct {
				Choices []any `json:"choices"`
				Usage   struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(evs[len(evs)-2]), &u); err != nil || len(u.Choices) != 0 || u.Usage.CompletionTokens != 5 {
				t.Errorf("usage chunk %s", evs[len(evs)-2])
			}
		})
	}
}

func checkFull(t *testing.T, b []byte, chat bool) {
	t.Helper()
	var r struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Text         string `json:"text"`
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	wantObj, wantPrefix := "text_completion", "cmpl-"
	if chat {
		wantObj, wantPrefix = "chat.completion", "chatcmpl-"
	}
	if r.Object != wantObj || !strings.HasPrefix(r.ID, wantPrefix) || len(r.Choices) != 1 || r.Choices[0].FinishReason != "length" {
		t.Fatalf("response %s", b)
	}
	if r.Usage.CompletionTokens != 5 || r.Usage.TotalTokens != r.Usage.PromptTokens+5 || r.Usage.PromptTokens <= 0 {
		t.Errorf("usage %+v", r.Usage)
	}
	if chat && r.Choices[0].Message.Role != "assistant" {
		t.Errorf("message %+v", r.Choices[0].Message)
	}
}

func TestContractErrors(t *testing.T) {
	base, m, hdr := contractTarget(t)
	cases := []struct {
		name string
		body any
		want int
	}{
		{"unknown model", map[string]any{"model": "no-such-model", "prompt": "x", "max_tokens": 1}, 404},
		{"max_tokens over context", map[string]any{"model": m, "prompt": "x", "max_tokens": 100000000}, 400},
		{"bad json", json.RawMessage(`{"model":`), 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var resp, b = post(t, base+"/v1/completions", c.body, hdr...)
			if raw, ok := c.body.(json.RawMessage); ok {
				resp, b = postRaw(t, base+"/v1/completions", raw, hdr...)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if resp.StatusCode != c.want || json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
				t.Fatalf("status %d body %s, want %d and an error envelope", resp.StatusCode, b, c.want)
			}
		})
	}
}

func TestContractTokenizeAndMetrics(t *testing.T) {
	base, m, _ := contractTarget(t)
	resp, b := post(t, base+"/tokenize", map[string]any{"model": m, "prompt": "hello world, how are you"})
	var tk struct {
		Count       int     `json:"count"`
		MaxModelLen int     `json:"max_model_len"`
		Tokens      []int64 `json:"tokens"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &tk) != nil || tk.Count != len(tk.Tokens) || tk.Count == 0 || tk.MaxModelLen <= 0 {
		t.Fatalf("/tokenize = %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, base+"/detokenize", map[string]any{"model": m, "tokens": tk.Tokens})
	if resp.StatusCode != 200 || !strings.Contains(string(b), "how are you") {
		t.Fatalf("/detokenize = %d %s", resp.StatusCode, b)
	}
	_, _ = post(t, base+"/v1/completions", map[string]any{"model": m, "prompt": "warm up", "max_tokens": 2})
	resp, b = testkit.Get(t, base+"/metrics")
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("/metrics = %d, parse error %v", resp.StatusCode, err)
	}
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
		"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
		"vllm:prefix_cache_queries_total", "process_start_time_seconds"} {
		f := fams[name]
		if f == nil {
			t.Errorf("metric %s missing", name)
			continue
		}
		if name == "process_start_time_seconds" {
			continue
		}
		labels := map[string]string{}
		for _, lp := range f.Metric[0].Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["model_name"] != m || labels["engine"] == "" {
			t.Errorf("%s labels %v, want model_name=%s and engine", name, labels, m)
		}
	}
	if f := fams["vllm:generation_tokens_total"]; f != nil && f.Metric[0].Counter.GetValue() < 2 {
		t.Errorf("generation tokens %v after a 2-token request", f.Metric[0].Counter.GetValue())
	}
}
